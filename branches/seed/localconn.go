package seed

import (
	"net/url"
	"strings"
)

// LocalConn reports whether a connection string of a KindURL source (a URL or
// libpq key=value string, as pg_basebackup -d takes it) would reach a server of
// the host the seed is built on by its own means rather than over the network,
// and names what: a unix socket (a host that is a directory or an abstract
// socket, or no host at all, which libpq takes for its default socket directory,
// when no hostaddr gives an address), where the server's OS user is its
// credential (peer authentication); or a service, whose settings are in a file of
// the host.
func LocalConn(conn string) (string, bool) {
	s, ok := connSettings(conn)
	if !ok {
		return "", false // pg_basebackup refuses it too
	}
	if svc, ok := s["service"]; ok {
		return "service " + svc + " of the host's service file", true
	}
	hosts := strings.Split(s["host"], ",")
	addrs := strings.Split(s["hostaddr"], ",")
	for i := range max(len(hosts), len(addrs)) {
		host, addr := "", ""
		if i < len(hosts) {
			host = strings.TrimSpace(hosts[i])
		}
		if i < len(addrs) {
			addr = strings.TrimSpace(addrs[i])
		}
		switch {
		case addr != "":
		case host == "":
			return "libpq's default unix socket directory", true
		case strings.HasPrefix(host, "/") || strings.HasPrefix(host, "@"):
			return host, true
		}
	}
	return "", false
}

// connSettings reads the settings of a connection string that say where it
// connects: host (comma-separated, as libpq takes several), hostaddr and service.
// A URL's hosts come from its authority unless a host parameter overrides them.
func connSettings(conn string) (map[string]string, bool) {
	rest, isURL := strings.CutPrefix(conn, "postgresql://")
	if !isURL {
		rest, isURL = strings.CutPrefix(conn, "postgres://")
	}
	if !isURL {
		return ConnValues(conn), true
	}
	authority, query, _ := strings.Cut(rest, "?")
	authority, _, _ = strings.Cut(authority, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	var hosts []string
	for _, spec := range strings.Split(authority, ",") {
		if strings.HasPrefix(spec, "[") { // an IPv6 address, [::1]:5432
			end := strings.IndexByte(spec, ']')
			if end < 0 {
				return nil, false
			}
			hosts = append(hosts, spec[1:end])
			continue
		}
		host, _, _ := strings.Cut(spec, ":")
		h, err := url.PathUnescape(host)
		if err != nil {
			return nil, false
		}
		hosts = append(hosts, h)
	}
	s := map[string]string{"host": strings.Join(hosts, ",")}
	params, err := url.ParseQuery(query)
	if err != nil {
		return nil, false
	}
	for _, k := range []string{"host", "hostaddr", "service"} {
		if v, ok := params[k]; ok && len(v) > 0 {
			s[k] = v[len(v)-1]
		}
	}
	return s, true
}

// ConnValues reads a libpq key=value string (values bare or single-quoted, with
// backslash escapes); a key given twice keeps its last value, as libpq does.
func ConnValues(conn string) map[string]string {
	out := map[string]string{}
	i := 0
	for {
		for i < len(conn) && (conn[i] == ' ' || conn[i] == '\t' || conn[i] == '\n') {
			i++
		}
		eq := strings.IndexByte(conn[i:], '=')
		if eq < 0 {
			return out
		}
		key := strings.TrimSpace(conn[i : i+eq])
		i += eq + 1
		for i < len(conn) && conn[i] == ' ' {
			i++
		}
		var val strings.Builder
		quoted := i < len(conn) && conn[i] == '\''
		if quoted {
			i++
		}
		for ; i < len(conn); i++ {
			c := conn[i]
			if c == '\\' && i+1 < len(conn) {
				i++
				val.WriteByte(conn[i])
				continue
			}
			if quoted && c == '\'' {
				i++
				break
			}
			if !quoted && (c == ' ' || c == '\t' || c == '\n') {
				break
			}
			val.WriteByte(c)
		}
		out[key] = val.String()
	}
}
