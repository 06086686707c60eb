package overlay

import "testing"

func TestUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{`/plain/path`, "/plain/path"},
		{`/a\040b`, "/a b"},
		{`/tab\011x`, "/tab\tx"},
		{`/nl\012x`, "/nl\nx"},
		{`/back\134slash`, `/back\slash`},
		{`/two\040spaces\040here`, "/two spaces here"},
		{`/end\040`, "/end "},
		{`\040start`, " start"},
		{`/short\04`, `/short\04`},         // too short to be an escape
		{`/notoctal\089`, `/notoctal\089`}, // 8 and 9 are not octal
		{`/trailing\`, `/trailing\`},
		{``, ``},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			if got := unescapeMountinfo(tc.in); got != tc.want {
				t.Errorf("unescapeMountinfo(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
