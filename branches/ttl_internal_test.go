package branches

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTTLJSON(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"72h"`: 72 * time.Hour, `"7d"`: 7 * 24 * time.Hour, `"90m"`: 90 * time.Minute,
		`"3600"`: time.Hour, `3600`: time.Hour, `0`: 0, `null`: 0,
	} {
		var got TTL
		if err := json.Unmarshal([]byte(in), &got); err != nil || time.Duration(got) != want {
			t.Errorf("%s: %v, %v; want %v", in, time.Duration(got), err, want)
		}
	}
	for _, in := range []string{`"-1h"`, `-5`, `"3 days"`, `1.5`, `true`, `"99999999999999d"`} {
		var got TTL
		if err := json.Unmarshal([]byte(in), &got); err == nil {
			t.Errorf("%s: read as %v, want an error", in, time.Duration(got))
		}
	}
	b, err := json.Marshal(Settings{TTL: new(TTL(72 * time.Hour))})
	if err != nil || string(b) != `{"ttl":"72h0m0s"}` {
		t.Errorf("Settings with a TTL: %s, %v", b, err)
	}
}
