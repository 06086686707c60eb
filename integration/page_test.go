package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// ownedSize is a size as the page shows a branch's owned bytes.
var ownedSize = regexp.MustCompile(`[0-9.]+ (KiB|MiB|GiB)`)

// browser starts headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run scripts/deps.sh")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1500, 560),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	// Accept the confirm() of destructive buttons, as a user clicking OK.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx
}

// TestPage: the web page on --admin-listen asks for the admin token, lists a branch
// created through the proxy, picks up a new one by itself, and its destroy button
// destroys the branch; a reset refused for a branch's open session offers a button
// that ends it and resets. UPDATE_PAGE_PNG=1 writes the screenshot to docs/page.png.
func TestPage(t *testing.T) {
	const token = "page-test-token-0123456789"
	admin := freeAddr(t)
	s := startServer(t, newStateDir(t), "--admin-listen", admin, "--admin-token", token)
	s.seedSQL("app", "CREATE TABLE items (id int PRIMARY KEY, name text);\nINSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 1000) g;")
	for _, b := range []string{"viewme", "feature-login"} {
		if out, err := s.psql(t, "app@"+b, "INSERT INTO items VALUES (5000, 'x')"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	s.mustCLI("branch", "set", "feature-login", "--ttl", "72h")

	ctx := browser(t)
	cd := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(cd(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v\n%s", sel, err, s.logs())
		}
		return v
	}
	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, s.logs())
		}
	}
	step("log in with a wrong token",
		chromedp.Navigate("http://"+admin+"/"),
		chromedp.WaitVisible(cd("#token")),
		chromedp.SendKeys(cd("#token"), "wrong-token"),
		chromedp.Click(cd("#login")),
		chromedp.WaitVisible(cd("p.error")))
	if got := text("p.error"); !strings.Contains(got, "wrong token") {
		t.Fatalf("wrong token: %q", got)
	}
	row := `#branches tr[data-branch="viewme"]`
	step("log in", chromedp.SendKeys(cd("#token"), token), chromedp.Click(cd("#login")), chromedp.WaitVisible(cd(row)))
	if got := text(row); !strings.Contains(got, "running") || !ownedSize.MatchString(got) {
		t.Fatalf("branch row: %q", got)
	}
	dsn, err := chromedp.Run(ctx, chromedp.Value(cd(row+" .dsn input")))
	if err != nil || !strings.Contains(dsn, "dbname=app@viewme") {
		t.Fatalf("connection string: %q %v", dsn, err)
	}

	// A branch made after the page loaded appears without a reload.
	c := s.connect(t, "app@ephemeral-test", "options=-cpgbranch.ephemeral=on")
	step("refresh by itself", chromedp.WaitVisible(cd(`#branches tr[data-branch="ephemeral-test"]`)))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_PAGE_PNG") == "1" {
		if err := os.WriteFile(filepath.Join("..", "docs", "page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.Close(t.Context())

	step("destroy button", chromedp.Click(cd(row+" button.destroy")), chromedp.WaitVisible(cd("p.flash")))
	if got := text("p.flash"); !strings.Contains(got, "destroy viewme") {
		t.Fatalf("after destroy: %q", got)
	}
	step("row gone", chromedp.WaitNotPresent(cd(row)))
	if _, ok := s.branches()["viewme"]; ok {
		t.Fatal("viewme still exists after its destroy button")
	}
	if _, ok := s.branches()["feature-login"]; !ok {
		t.Fatal("another branch went with it")
	}

	// A reset refused for the branch's open session comes back with a button
	// that ends it and resets.
	held := s.connect(t, "app@feature-login")
	frow := `#branches tr[data-branch="feature-login"]`
	step("reset refused", chromedp.Click(cd(frow+" button.reset")), chromedp.WaitVisible(cd("#failed button.force")))
	if got := text("#failed"); !strings.Contains(got, "open sessions") || !strings.Contains(got, "end 1 session and reset") {
		t.Fatalf("after a reset of a branch in use: %q", got)
	}
	step("force button", chromedp.Click(cd("#failed button.force")), chromedp.WaitNotPresent(cd("#failed")), chromedp.WaitVisible(cd("p.flash")))
	if got := text("p.flash"); !strings.Contains(got, "reset --force feature-login") {
		t.Fatalf("after the force button: %q", got)
	}
	if _, err := held.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Fatal("the session survived the forced reset")
	}
	if out, err := s.psql(t, "app@feature-login", "SELECT count(*) FROM items WHERE id = 5000"); err != nil || out != "0" {
		t.Fatalf("feature-login after its reset: %q %v", out, err)
	}
	s.mustCLI("branch", "destroy", "feature-login")
}
