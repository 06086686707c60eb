package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/router"
	"github.com/spf13/pflag"
)

// sizeFlag is a flag holding a byte count written like 500MB or 2GB.
type sizeFlag struct{ p *int64 }

func (f sizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	// In the largest unit that writes it whole, as Set reads it back.
	n := *f.p
	for _, u := range []struct {
		name  string
		bytes int64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}} {
		if n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (f sizeFlag) Set(s string) error {
	n, ok := router.ParseSize(s)
	if !ok {
		return fmt.Errorf("%q is not a size: use e.g. 500MB, 2GB or a number of bytes", s)
	}
	*f.p = n
	return nil
}

func (f sizeFlag) Type() string { return "size" }

// durationFlag is a flag holding a duration written as pgbranch.ttl takes it, the
// same for every duration flag: a Go duration (90s, 10m, 1h30m), days (7d) or
// whole seconds (3600); never negative. positive refuses 0 too, for a flag to
// which 0 means nothing (an interval, a timeout).
type durationFlag struct {
	p        *time.Duration
	positive bool
}

func (f durationFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return "0" // what the help takes for no default
	}
	if day := 24 * time.Hour; *f.p%day == 0 {
		return strconv.FormatInt(int64(*f.p/day), 10) + "d"
	}
	return f.p.String()
}

func (f durationFlag) Set(s string) error {
	v := strings.TrimSpace(s)
	d, ok := router.ParseTTL(v)
	switch {
	case !ok && strings.HasPrefix(v, "-"):
		return fmt.Errorf("%q is a negative duration: want 0 or more, e.g. 90s, 10m, 12h or 7d", s)
	case !ok:
		return fmt.Errorf("%q is not a duration: use e.g. 90s, 10m, 12h, 7d or a number of seconds", s)
	}
	if d == 0 && f.positive {
		return fmt.Errorf("%q: want more than 0, e.g. 10s", s)
	}
	*f.p = d
	return nil
}

func (f durationFlag) Type() string { return "duration" }

// durationVar defines a duration flag (durationFlag) with a default.
func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var(durationFlag{p: p}, name, usage)
}

// positiveDurationVar defines a duration flag that refuses 0.
func positiveDurationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var(durationFlag{p: p, positive: true}, name, usage)
}
