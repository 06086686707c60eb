package router

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// apply records one pgbranch.* setting in o.
func (o *Options) apply(s setting) error {
	switch s.key {
	case OptSource, OptFrom, OptTTL, OptEphemeral, OptReset, OptQuota:
	default:
		return &Error{
			Err:     ErrInvalidOption,
			Message: "unrecognized option " + quote(s.name),
			Hint:    "known options: " + knownOptions,
		}
	}
	if !s.hasValue {
		return &Error{
			Err:     ErrInvalidOption,
			Message: "option " + quote(s.key) + " requires a value",
			Hint:    "write -c " + s.key + "=VALUE",
		}
	}
	switch s.key {
	case OptSource:
		if s.value == "" {
			return invalidValue(s, "name one of the configured sources")
		}
		o.Source = s.value
	case OptFrom:
		if !ValidBranchName(s.value) {
			return invalidValue(s, "the parent must be an existing branch; "+BranchNameHint)
		}
		o.From = s.value
	case OptTTL:
		d, ok := ParseTTL(s.value)
		if !ok {
			return invalidValue(s, "use a non-negative duration such as 3600 (seconds), 90s, 30m, 12h or 7d")
		}
		o.TTL = d
	case OptQuota:
		n, ok := ParseSize(s.value)
		if !ok || n == 0 {
			return invalidValue(s, "use a size such as 500MB, 2GB or 1073741824 (bytes)")
		}
		o.Quota = n
	case OptEphemeral, OptReset:
		v, ok := parseBool(s.value)
		if !ok {
			return invalidValue(s, "use on or off")
		}
		if s.key == OptEphemeral {
			o.Ephemeral = v
		} else {
			o.Reset = v
		}
	}
	return nil
}

// invalidValue is the error for a bad value of a known option.
func invalidValue(s setting, hint string) *Error {
	return &Error{
		Err:     ErrInvalidOption,
		Message: "invalid value for option " + strconv.Quote(s.key) + ": " + quote(s.value),
		Hint:    hint,
	}
}

// ParseTTL reads a time to live: a Go duration ("90m", "1h30m"), whole seconds ("3600")
// or whole days ("7d"). Negative and overflowing values are rejected.
func ParseTTL(v string) (time.Duration, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return scale(n, time.Second)
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.ParseInt(days, 10, 64); err == nil {
			return scale(n, 24*time.Hour)
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// scale returns n units, if that is neither negative nor too large for a Duration.
func scale(n int64, unit time.Duration) (time.Duration, bool) {
	if n < 0 || n > math.MaxInt64/int64(unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// parseBool reads a boolean as Postgres's parse_bool does: any unambiguous prefix of
// true, false, yes, no, on or off (at least "on" or "of"), or 1 or 0, in any case.
func parseBool(v string) (value, ok bool) {
	lv := asciiLower(v)
	prefixOf := func(word string, min int) bool {
		return len(lv) >= min && len(lv) <= len(word) && lv == word[:len(lv)]
	}
	switch {
	case lv == "1", prefixOf("true", 1), prefixOf("yes", 1), prefixOf("on", 2):
		return true, true
	case lv == "0", prefixOf("false", 1), prefixOf("no", 1), prefixOf("off", 2):
		return false, true
	}
	return false, false
}

// ParseSize reads a size in bytes: a whole number of bytes, or a number with one of
// the units B, kB, MB, GB, TB (1024-based, as Postgres reads memory settings) or
// KiB, MiB, GiB, TiB. Negative and overflowing sizes are rejected.
func ParseSize(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	num, unit := v[:i], strings.TrimSpace(v[i:])
	if num == "" {
		return 0, false
	}
	mult := map[string]float64{"": 1, "B": 1, "kB": 1 << 10, "KB": 1 << 10, "KiB": 1 << 10, "MB": 1 << 20, "MiB": 1 << 20,
		"GB": 1 << 30, "GiB": 1 << 30, "TB": 1 << 40, "TiB": 1 << 40}[unit]
	if mult == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*mult > math.MaxInt64/2 {
		return 0, false
	}
	return int64(f * mult), true
}
