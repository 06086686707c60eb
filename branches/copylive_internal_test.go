package branches

import "testing"

func TestOnlyVanished(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"", false},
		{"cp: cannot stat '/s/upper/./pg_wal/000000010000000000000009': No such file or directory\n", true},
		{"cp: cannot stat '/s/upper/./base/16384/t4_16446': No such file or directory\n" +
			"cp: cannot open '/s/upper/./base/16384/16450' for reading: No such file or directory\n" +
			"cp: cannot access '/s/upper/./base/16390': No such file or directory", true},
		{"cp: cannot create regular file '/s/layer/./base/1': No such file or directory", false},
		{"cp: error writing '/s/layer/./base/1/1259': No space left on device", false},
		{"cp: cannot stat '/s/upper/./pg_wal/x': No such file or directory\ncp: error writing '/s/layer/y': No space left on device", false},
		{"cp: cannot open '/s/upper/./base/1/1259' for reading: Permission denied", false},
	} {
		if got := onlyVanished(c.out); got != c.want {
			t.Errorf("onlyVanished(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}
