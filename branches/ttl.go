package branches

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// TTL is a branch's time to live as the admin API reads and writes it. It reads a
// string in the syntax of pgbranch.ttl ("90m", "72h", "7d", "3600" for seconds) or a
// number of seconds, and writes a string ("72h0m0s", as branch ls shows it): a bare
// number read as nanoseconds, as time.Duration would, made {"ttl": 3600} a TTL of
// 3.6 µs.
type TTL time.Duration

func (t TTL) String() string { return time.Duration(t).String() }

// MarshalJSON writes t as a duration string.
func (t TTL) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.String())
}

// UnmarshalJSON reads a duration string or a number of seconds (null: no change);
// negative and overflowing values are errors.
func (t *TTL) UnmarshalJSON(b []byte) error {
	text := string(bytes.TrimSpace(b))
	if text == "null" {
		return nil // as for any JSON value: null leaves it as it is
	}
	if s, err := strconv.Unquote(text); err == nil && len(text) > 0 && text[0] == '"' {
		text = s
	}
	d, ok := router.ParseTTL(text)
	if !ok {
		return fmt.Errorf("ttl %s: use a duration such as \"90m\", \"72h\" or \"7d\", or a number of seconds", b)
	}
	*t = TTL(d)
	return nil
}
