package admin

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

//go:embed page/*
var pageFiles embed.FS

var pageTmpl = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"bytes": humanBytes,
	"ago":   ago,
	"until": until,
}).ParseFS(pageFiles, "page/page.html"))

// tokenCookie carries the admin token of a browser that logged in to the page.
const tokenCookie = "pgbranch_admin_token"

// WithPage serves the web page at / (and its parts under /ui/) in front of api, and
// passes every other path to api. The page reads and acts only through api, with the
// token the browser logged in with as its bearer token, so api's authentication,
// roles and audit apply to the page as to any client. listen is the proxy's
// --listen address, for the connection strings the page shows.
func WithPage(api http.Handler, listen string) http.Handler {
	p := &page{api: api, listen: listen}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", p.full)
	mux.HandleFunc("GET /ui/live", p.live)
	mux.HandleFunc("GET /ui/page.css", p.asset("page/page.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /ui/page.js", p.asset("page/page.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("POST /ui/login", p.login)
	mux.HandleFunc("POST /ui/logout", p.logout)
	mux.HandleFunc("POST /ui/branches/{name}/{action}", p.action)
	mux.Handle("/", api)
	return mux
}

type page struct {
	api    http.Handler
	listen string
}

// call runs one API request on behalf of the browser's request r and decodes a
// JSON answer into out. It returns the API's status.
func (p *page) call(r *http.Request, method, path string, out any) (int, string) {
	req := r.Clone(r.Context())
	req.Method, req.Body, req.ContentLength = method, http.NoBody, 0
	u, err := url.Parse(path) // path escapes its names: Path is their plain form
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	req.URL = u
	req.RequestURI = req.URL.RequestURI()
	if c, err := r.Cookie(tokenCookie); err == nil && c.Value != "" {
		req.Header.Set("Authorization", "Bearer "+c.Value)
	}
	rec := &answer{header: http.Header{}, status: http.StatusOK}
	p.api.ServeHTTP(rec, req)
	if rec.status != http.StatusOK {
		var e Error
		json.Unmarshal(rec.body.Bytes(), &e)
		if e.Error == "" {
			e.Error = http.StatusText(rec.status)
		}
		return rec.status, e.Error
	}
	if out != nil {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return http.StatusInternalServerError, err.Error()
		}
	}
	return http.StatusOK, ""
}

// answer keeps an API answer in memory.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *answer) Header() http.Header         { return w.header }
func (w *answer) WriteHeader(status int)      { w.status = status }
func (w *answer) Write(b []byte) (int, error) { return w.body.Write(b) }

func (p *page) full(w http.ResponseWriter, r *http.Request) { p.render(w, r, "page.html") }
func (p *page) live(w http.ResponseWriter, r *http.Request) { p.render(w, r, "live") }

func (p *page) render(w http.ResponseWriter, r *http.Request, name string) {
	d := p.load(r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	if d.Login && name == "live" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if err := pageTmpl.ExecuteTemplate(w, name, d); err != nil {
		fmt.Fprintf(w, "<p>page error: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

// load reads what the page shows through the API.
func (p *page) load(r *http.Request) *pageData {
	q := r.URL.Query()
	d := &pageData{Flash: q.Get("done"), Failed: q.Get("error"), Now: time.Now()}
	status, msg := p.call(r, http.MethodGet, "/v1/info", &d.Info)
	switch status {
	case http.StatusOK, http.StatusForbidden: // a ci token may list its branches only
	case http.StatusUnauthorized:
		d.Login, d.LoginError = true, r.URL.Query().Get("login")
		return d
	default:
		d.Error = msg
		return d
	}
	// What the token may not read stays empty.
	if status, msg := p.call(r, http.MethodGet, "/v1/sources", &d.Sources); status != http.StatusOK && status != http.StatusForbidden {
		d.Error = msg
	}
	var list []branches.Info
	if _, msg := p.call(r, http.MethodGet, "/v1/branches", &list); msg != "" {
		d.Error = msg
	}
	host, port := p.proxyHost(r)
	d.fill(list, host, port)
	d.offerForce(q.Get("busy"), q.Get("source"), q.Get("branch"))
	return d
}

// proxyHost is the host and port clients reach the proxy on: the --listen address,
// with the host the browser used when it listens on every address.
func (p *page) proxyHost(r *http.Request) (host, port string) {
	host, port, err := net.SplitHostPort(p.listen)
	if err != nil {
		return "127.0.0.1", "6432"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		if host == "" || host == "pgbranchproxy" { // the admin socket's clients name no host
			host = "127.0.0.1"
		}
	}
	return host, port
}

func (p *page) asset(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := pageFiles.ReadFile(name)
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	}
}

// sameOrigin refuses a form post from another site's page.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == "" // no Origin: not a browser's cross-site post
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (p *page) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	token := r.PostFormValue("token")
	r.Header.Del("Cookie") // the token being tried, not one the browser held before
	r.AddCookie(&http.Cookie{Name: tokenCookie, Value: token})
	switch status, msg := p.call(r, http.MethodGet, "/v1/branches", nil); status {
	case http.StatusOK, http.StatusForbidden:
	case http.StatusUnauthorized:
		http.Redirect(w, r, "/?login=wrong+token", http.StatusSeeOther)
		return
	default:
		http.Redirect(w, r, "/?"+url.Values{"login": {"the server could not check the token: " + msg}}.Encode(), http.StatusSeeOther)
		return
	}
	// Only a token the API took is kept; a role that may not list branches sees
	// the refusal on the page.
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (p *page) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// action runs a branch's reset, stop or destroy through the API, then goes back to
// the page with what happened. A form with force=true ends the branch's sessions
// (the API's ?force=true); a refusal for open sessions sends the page the action,
// branch and source to offer that (busy=, branch=, source=).
func (p *page) action(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	name, action := r.PathValue("name"), r.PathValue("action")
	path := "/v1/branches/" + url.PathEscape(name)
	method := http.MethodPost
	switch action {
	case "reset", "stop":
		path += "/" + action
	case "destroy":
		method = http.MethodDelete
	default:
		http.Error(w, "unknown action", http.StatusNotFound)
		return
	}
	src := r.PostFormValue("source")
	force := r.PostFormValue("force") == "true"
	api := url.Values{}
	if src != "" {
		api.Set("source", src)
	}
	if force {
		api.Set("force", "true")
	}
	if len(api) > 0 {
		path += "?" + api.Encode()
	}
	io.Copy(io.Discard, r.Body)
	q := url.Values{}
	done := action + " " + name
	if force {
		done = action + " --force " + name
	}
	if status, msg := p.call(r, method, path, nil); msg != "" {
		q.Set("error", done+": "+msg)
		if status == http.StatusConflict && !force && strings.Contains(msg, branches.ErrBusy.Error()) {
			q.Set("busy", action)
			q.Set("branch", name)
			if src != "" {
				q.Set("source", src)
			}
		}
	} else {
		q.Set("done", done)
	}
	http.Redirect(w, r, "/?"+q.Encode(), http.StatusSeeOther)
}
