package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
)

// A write that finds its branch lost fails with ErrLost and ErrFenced at once:
// the client is told the branch was lost, which it can act on.
func TestClassifyLostBeforeFenced(t *testing.T) {
	err := fmt.Errorf("record stop: %w: %w", errs.ErrFenced, errs.ErrLost)
	if ce := classify(err); ce.message != "the branch was on a lost node" {
		t.Fatalf("classified as %q, want the branch lost", ce.message)
	}
}

// A ClientError reaches the client as it says, wrapped or not, with its cause
// kept out of what the client reads.
func TestClassifyClientError(t *testing.T) {
	err := fmt.Errorf("dial branch server: %w", &ClientError{Code: "57P03", Message: "node down", Hint: "later",
		Err: fmt.Errorf("dial tcp 10.0.0.1:5: connection refused")})
	ce := classify(err)
	if ce.code != "57P03" || ce.message != "node down" || ce.hint != "later" || ce.detail != "" || ce.id != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A name another node took while this one created it asks the client to retry.
func TestClassifyNameTakenElsewhere(t *testing.T) {
	err := fmt.Errorf("record new branch: %w", fmt.Errorf("%w (on another node): x", errs.ErrExists))
	if ce := classify(err); ce.code != "57P03" || ce.id != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A branch whose seed is on another host gets 57P03 saying so.
func TestClassifyLayerMissing(t *testing.T) {
	err := fmt.Errorf("start: %w: /var/lib/x/seeds/app/g1/data", errs.ErrLayerMissing)
	if ce := classify(err); ce.code != "57P03" || ce.id != "" || ce.detail != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A branch of a source removed meanwhile (on another node) is refused as of an
// unknown source: 3D000, not an internal error.
func TestClassifySourceRemoved(t *testing.T) {
	err := fmt.Errorf("record new branch: %w: %w", errs.ErrNotFound, errors.New(`branch "x" of source "s": no such source`))
	if ce := classify(err); ce.code != "3D000" || ce.id != "" {
		t.Fatalf("classified as %+v", ce)
	}
}

// A start-up that failed once its own deadline had passed is 57P03, whichever
// step noticed it first: the context, or a socket deadline set from it (which
// may fire before the context is cancelled). An engine error that names its
// cause keeps it, and a failure before the deadline stays what it was.
func TestClassifyOutOfTime(t *testing.T) {
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	for _, err := range []error{
		fmt.Errorf("dial branch server: %w", context.DeadlineExceeded),
		fmt.Errorf("read startup response: %w", os.ErrDeadlineExceeded),
	} {
		if ce := classify(outOfTime(past, err)); ce.code != "57P03" || ce.id != "" {
			t.Errorf("%v: classified as %+v", err, ce)
		}
	}
	if ce := classify(outOfTime(past, errs.ErrClosed)); ce.code != "57P01" {
		t.Errorf("closed, out of time: classified as %+v, want the shutdown's 57P01", ce)
	}
	future, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	inner := fmt.Errorf("wait for postgres to accept connections: %w", context.DeadlineExceeded)
	if ce := classify(outOfTime(future, inner)); ce.code != "XX000" || ce.id == "" {
		t.Errorf("an operation's own timeout, with time left: classified as %+v, want an internal error", ce)
	}
}
