package admin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// pageData is what the page template shows.
type pageData struct {
	Login      bool
	LoginError string
	// Flash and Failed say how the button the page was posted from went; they
	// stay while the live part refreshes.
	Flash  string
	Failed string
	// Busy offers to repeat an action refused for the branch's open sessions,
	// ending them; nil when there is nothing to offer.
	Busy *forceOffer
	// Error is why the page could not read what it shows.
	Error    string
	Now      time.Time
	Info     branches.ServerInfo
	Sources  []branches.SourceInfo
	Branches []branchRow
	Sessions int
	Running  int
	Owned    int64
}

// branchRow is one branch with its connection string.
type branchRow struct {
	branches.Info
	DSN string
}

// fill adds the branches, with their connection strings, and the totals.
func (d *pageData) fill(list []branches.Info, host, port string) {
	dbOf := map[string]string{}
	for _, s := range d.Sources {
		dbOf[s.Name] = cmp.Or(s.Database, mainDatabase(s.Databases), "postgres")
	}
	for _, b := range list {
		dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=%s", router.QuoteConnValue(host), router.QuoteConnValue(port),
			router.QuoteConnValue(dbOf[b.Source]+"@"+b.Name))
		if len(d.Sources) > 1 {
			dsn += " options=" + router.QuoteConnValue("-c pgbranch.source="+b.Source)
		}
		d.Branches = append(d.Branches, branchRow{Info: b, DSN: dsn})
		d.Sessions += b.Sessions
		d.Owned += b.OwnedBytes
		if b.State == "running" {
			d.Running++
		}
	}
}

// forceOffer is a button that repeats a reset, stop or destroy with force=true.
type forceOffer struct {
	Action, Name, Source string
	Sessions             int
}

// Label is the button's text: "end 2 sessions and reset".
func (o *forceOffer) Label() string {
	switch o.Sessions {
	case 0: // they ended since the refusal: force ends nothing
		return o.Action + " now"
	case 1:
		return "end 1 session and " + o.Action
	}
	return fmt.Sprintf("end %d sessions and %s", o.Sessions, o.Action)
}

// Confirm is what the page's script asks before the button posts.
func (o *forceOffer) Confirm() string {
	what := map[string]string{
		"reset":   "reset " + o.Name + " to its base? Its writes are lost.",
		"stop":    "stop the server of " + o.Name + "?",
		"destroy": "destroy " + o.Name + " and its data?",
	}[o.Action]
	if o.Sessions == 0 {
		return strings.ToUpper(what[:1]) + what[1:]
	}
	return "End the open sessions of " + o.Name + " (each client is disconnected) and " + what
}

// offerForce sets d.Busy when the page was sent back after action on the branch
// was refused for its open sessions and the branch is still listed.
func (d *pageData) offerForce(action, source, name string) {
	if action != "reset" && action != "stop" && action != "destroy" {
		return
	}
	for _, b := range d.Branches {
		if b.Name == name && (source == "" || b.Source == source) {
			d.Busy = &forceOffer{Action: action, Name: name, Source: source, Sessions: b.Sessions}
			return
		}
	}
}

// mainDatabase is the database a source's branches are usually used through: the
// first that is not postgres or a template.
func mainDatabase(dbs []string) string {
	for _, db := range dbs {
		if !slices.Contains([]string{"postgres", "template0", "template1"}, db) {
			return db
		}
	}
	return "postgres"
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return roughly(time.Since(t)) + " ago"
}

func until(t *time.Time) string {
	if t == nil {
		return "never"
	}
	d := time.Until(*t)
	if d <= 0 {
		return "due now"
	}
	return "in " + roughly(d)
}

// roughly is a duration to the unit that matters.
func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
