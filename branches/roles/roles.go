package roles

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Role is one role's login data.
type Role struct {
	Name       string     `json:"name"`
	Password   string     `json:"password,omitempty"` // rolpassword: a SCRAM-SHA-256 or md5 verifier, or ""
	CanLogin   bool       `json:"can_login"`
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	// Superuser is rolsuper; nil in a set recorded before it was read, where it
	// is not known.
	Superuser *bool `json:"superuser,omitempty"`
}

// CanAuthenticate reports whether the role may log in with a password at t: it has
// LOGIN, a password, and the password has not expired.
func (r Role) CanAuthenticate(t time.Time) bool {
	return r.CanLogin && r.Password != "" && (r.ValidUntil == nil || !t.After(*r.ValidUntil))
}

// MaySuperuse reports whether the role is a superuser, or may be taken for one
// because its set was recorded before superusers were (Superuser nil).
func (r Role) MaySuperuse() bool {
	return r.Superuser == nil || *r.Superuser
}

// Set is the roles of one cluster, by name.
type Set map[string]Role

// query needs a superuser: pg_authid holds the verifiers.
// 'infinity' never expires; '-infinity' has always expired.
const query = `SELECT rolname, coalesce(rolpassword, ''), rolcanlogin, rolsuper,
	CASE WHEN rolvaliduntil = 'infinity' THEN NULL
	     WHEN rolvaliduntil = '-infinity' THEN 'epoch'::timestamptz
	     ELSE rolvaliduntil END
	FROM pg_catalog.pg_authid`

// Read reads the roles through conn, which must be a superuser's.
func Read(ctx context.Context, conn *pgx.Conn) (Set, error) {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	set := Set{}
	for rows.Next() {
		var r Role
		var until *time.Time
		var super bool
		if err := rows.Scan(&r.Name, &r.Password, &r.CanLogin, &super, &until); err != nil {
			rows.Close()
			return nil, err
		}
		if until != nil && !until.IsZero() {
			u := until.UTC()
			r.ValidUntil = &u
		}
		r.Superuser = &super
		set[r.Name] = r
	}
	return set, rows.Err()
}

// Encode serialises s for the catalog.
func (s Set) Encode() string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Decode parses what Encode wrote; "" is a nil Set (unknown).
func Decode(text string) (Set, error) {
	if text == "" {
		return nil, nil
	}
	var s Set
	err := json.Unmarshal([]byte(text), &s)
	return s, err
}
