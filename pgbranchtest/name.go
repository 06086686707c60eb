package pgbranchtest

import (
	"crypto/rand"
	"strings"
)

// maxBranchName is the longest branch name the proxy accepts.
const maxBranchName = 63

// BranchName is a branch name for the test named testName: the name lowercased,
// every run of other characters than a-z and 0-9 made one '-', cut to fit, and a
// random part of six characters appended. It matches ^[a-z0-9][a-z0-9-]{0,62}$.
func BranchName(testName string) string {
	const suffix = 7 // "-" and six random characters
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	name := b.String()
	if len(name) > maxBranchName-suffix {
		name = strings.TrimRight(name[:maxBranchName-suffix], "-")
	}
	if name == "" {
		name = "test"
	}
	return name + "-" + randomPart(suffix-1)
}

func randomPart(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	buf := make([]byte, n)
	rand.Read(buf)
	for i, c := range buf {
		buf[i] = alphabet[int(c)%len(alphabet)]
	}
	return string(buf)
}
