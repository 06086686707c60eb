package failpoint_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"", true},
		{"mount=error", true},
		{"mount@b1=2*error; catalog.running@b2=kill", true},
		{"usage=sleep(10ms)", true},
		{"roles@b=1>1*kill", true},
		{"roles@b=x>kill", false},
		{"mount", false},
		{"=error", false},
		{"mount=explode", false},
		{"mount=0*error", false},
		{"mount=sleep(forever)", false},
	} {
		_, err := failpoint.Parse(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q): %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}

func TestHit(t *testing.T) {
	t.Parallel()
	var none *failpoint.Set
	if err := none.Hit(failpoint.Mount, "b", 0); err != nil || none.Enabled() {
		t.Fatalf("nil set: %v", err)
	}
	s, err := failpoint.Parse("mount@b1=2*error;usage=sleep(20ms)")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Hit(failpoint.Mount, "b2", 0); err != nil {
		t.Errorf("rule for b1 fired on b2: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Hit(failpoint.Mount, "b1", 0); !errors.Is(err, failpoint.ErrInjected) {
			t.Errorf("hit %d: %v, want ErrInjected", i, err)
		}
	}
	if err := s.Hit(failpoint.Mount, "b1", 0); err != nil {
		t.Errorf("third hit of a 2* rule: %v", err)
	}
	skip, _ := failpoint.Parse("roles=1>1*error")
	for i, want := range []bool{false, true, false} {
		if err := skip.Hit(failpoint.Roles, "b", 0); (err != nil) != want {
			t.Errorf("1>1* rule, hit %d: %v, want fired=%v", i, err, want)
		}
	}
	start := time.Now()
	if err := s.Hit(failpoint.Usage, "any", 0); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Errorf("sleep rule: %v after %s", err, time.Since(start))
	}
}
