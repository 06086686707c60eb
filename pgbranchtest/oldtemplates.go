package pgbranchtest

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Templates of older seed generations. After `source refresh` every run migrates
// the new seed into a template of its own (templateName), and nothing branches
// from a template of an older generation again once its branches are gone.

// swept holds the sources (by admin API and name) whose old templates this test
// binary has removed: once is enough.
var swept sync.Map

// sweepTimeout bounds the removal of old templates.
const sweepTimeout = time.Minute

// removeOldTemplates removes, once per test binary and source, the templates in
// sources that were made from a seed generation of source older than generation.
// The server refuses to remove one that a branch still uses (a failed test's kept
// branch, a test of a run that began before the refresh); a later run removes it.
// Failures are not the tests': they are left for that later run.
func removeOldTemplates(ctx context.Context, admin *adminClient, sources []sourceInfo, source string, generation int) {
	if _, done := swept.LoadOrStore(admin.base+"\x00"+source, true); done {
		return
	}
	old := oldTemplates(sources, source, generation)
	if len(old) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepTimeout)
	defer cancel()
	for _, name := range old {
		_ = admin.call(ctx, http.MethodDelete, "/v1/sources/"+url.PathEscape(name), nil, nil)
	}
}

// oldTemplates are the templates in sources made from source at a seed generation
// before generation: seeded from a branch of source named as a template, whose
// name ends with that generation.
func oldTemplates(sources []sourceInfo, source string, generation int) []string {
	var out []string
	for _, s := range sources {
		from, branch, ok := strings.Cut(s.From, "/")
		if !ok || from != source || branch != s.Name || !strings.HasPrefix(s.Name, templatePrefix) {
			continue
		}
		i := strings.LastIndex(s.Name, "-g")
		if i < 0 {
			continue
		}
		if g, err := strconv.Atoi(s.Name[i+2:]); err == nil && g < generation {
			out = append(out, s.Name)
		}
	}
	return out
}
