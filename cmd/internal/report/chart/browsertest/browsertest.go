package browsertest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser tests render the page in headless Chromium (Debian's package
// "chromium") through the DevTools protocol. Without a browser they skip,
// unless TORCHMEM_REQUIRE_BROWSER=1 makes that a failure (CI sets it).
// TORCHMEM_SCREENSHOT_DIR=dir keeps a PNG of each page for a human look.

// FindChromium returns the browser's path or skips (fails under
// TORCHMEM_REQUIRE_BROWSER=1) when none is installed.
func FindChromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TORCHMEM_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium found and TORCHMEM_REQUIRE_BROWSER=1 (apt-get install -y chromium)")
	}
	t.Skip("no chromium installed: skipping the browser test (apt-get install -y chromium; TORCHMEM_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// Report is what the page did while loaded.
type Report struct {
	mu       sync.Mutex
	requests []string // every URL the page asked for
	errors   []string // console errors, uncaught exceptions, log errors
	dialogs  []string // alert/confirm/prompt: an injection ran
	pageURL  string
}

// Problems lists every request other than the page itself (and data:
// URLs), every error and every dialog.
func (r *Report) Problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, u := range r.requests {
		if u != r.pageURL && !strings.HasPrefix(u, "data:") {
			out = append(out, "page made a request: "+u)
		}
	}
	if len(r.requests) == 0 {
		out = append(out, "no request seen at all, not even the page: the network listener is broken")
	}
	for _, e := range r.errors {
		out = append(out, "browser error: "+e)
	}
	for _, d := range r.dialogs {
		out = append(out, "a dialog opened (injected script ran): "+d)
	}
	return out
}

func (r *Report) add(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
}

// shared is the one headless Chromium of a test binary and its one tab.
// Starting a browser takes seconds of CPU, and so does each new tab (a
// BrowserContext and renderer processes of its own cost more than the
// report's page itself), so every page loads in the browser's first tab, one
// test at a time: OpenPage holds the tab until the test ends, and a page
// that goes leaves the tab on a blank page before the next comes. Pages
// keep nothing between them (the reports use no storage, cookie or cache;
// each load is a new document), and what the tab reports (requests,
// errors, dialogs) goes to the test that holds it. Close stops the browser.
var shared struct {
	mu      sync.Mutex      // guards the fields below
	ctx     context.Context // the tab
	cancel  func()
	dataDir string
	blank   string // a page with nothing on it, where the tab waits
	err     error

	tab     sync.Mutex // held by the test whose page is in the tab
	repMu   sync.Mutex
	current *Report // the holder's report: the tab's events go there
}

// browser returns the shared tab, starting the browser the first time.
func browser(t testing.TB, exe string) context.Context {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ctx == nil && shared.err == nil {
		shared.err = startBrowser(exe)
	}
	if shared.err != nil {
		t.Fatalf("starting %s: %v", exe, shared.err)
	}
	return shared.ctx
}

func startBrowser(exe string) error {
	dir, err := os.MkdirTemp("", "torchmem-chromium-")
	if err != nil {
		return err
	}
	blank := filepath.Join(dir, "blank.html")
	if err := os.WriteFile(blank, []byte("<!DOCTYPE html><title>blank</title>\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return err
	}
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	// The first Run starts the browser and binds ctx to its first tab (no
	// timeout: each page puts its own).
	if err := chromedp.Do(ctx); err != nil {
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(dir)
		return err
	}
	err = chromedp.Listen(ctx, func(ev any) {
		shared.repMu.Lock()
		rep := shared.current
		shared.repMu.Unlock()
		if rep != nil {
			rep.event(ctx, ev)
		} else if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			// Between pages: nobody's, but a dialog left open would stall the tab.
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false}) //nolint:errcheck
		}
	})
	if err == nil {
		// chromedp enables the log and network domains itself; console
		// events need the runtime domain.
		_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	}
	if err != nil {
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(dir)
		return err
	}
	shared.ctx, shared.dataDir, shared.blank = ctx, dir, blank
	shared.cancel = func() { cancelCtx(); cancelAlloc() }
	return nil
}

// event records what the page did.
func (r *Report) event(ctx context.Context, ev any) {
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		r.add(&r.requests, e.Request.URL)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			r.add(&r.errors, "console."+string(e.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		r.add(&r.errors, "exception: "+msg)
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			r.add(&r.errors, "log: "+e.Entry.Text+" "+e.Entry.URL)
		}
	case *page.EventJavascriptDialogOpening:
		r.add(&r.dialogs, string(e.Type)+": "+e.Message)
		go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false}) //nolint:errcheck
	}
}

// Close stops the shared browser, if a test started it. A package with
// browser tests calls it from TestMain after m.Run (the kernel kills a
// browser left running when the test binary exits, but its helpers could
// outlive it and keep writing its data directory).
func Close() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cancel != nil {
		shared.cancel()
		os.RemoveAll(shared.dataDir)
	}
	shared.ctx, shared.cancel, shared.err = nil, nil, nil
}

// OpenPage loads path in the shared headless Chromium's tab (a window of
// 1280x800), which the test holds until it ends (another test's OpenPage
// waits), and returns a context to drive it and the report that fills
// while it runs. With checkClean, any problem the page had fails the test
// at its end. A test opens one page.
func OpenPage(t testing.TB, path string, checkClean bool) (context.Context, *Report) {
	exe := FindChromium(t)
	tab := browser(t, exe)
	shared.tab.Lock()
	rep := &Report{}
	shared.repMu.Lock()
	shared.current = rep
	shared.repMu.Unlock()
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() {
		// The page goes (its timers and pending requests with it) before
		// the next test's page comes; what it does meanwhile is nobody's.
		shared.repMu.Lock()
		shared.current = nil
		shared.repMu.Unlock()
		blankCtx, cancelBlank := context.WithTimeout(tab, 30*time.Second)
		err := chromedp.Do(blankCtx, chromedp.Navigate((&url.URL{Scheme: "file", Path: shared.blank}).String()))
		cancelBlank()
		cancel()
		shared.tab.Unlock()
		if err != nil {
			t.Errorf("leaving the page for a blank one: %v", err)
		}
	})

	pageURL := (&url.URL{Scheme: "file", Path: path}).String()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(".torchmem-chart canvas")),
	); err != nil {
		t.Fatalf("loading %s in %s: %v", pageURL, exe, err)
	}
	rep.mu.Lock()
	rep.pageURL = pageURL
	rep.mu.Unlock()
	if checkClean {
		t.Cleanup(func() {
			for _, p := range rep.Problems() {
				t.Error(p)
			}
		})
	}
	return ctx, rep
}

// Eval runs a JavaScript expression in the page and decodes its value,
// failing the test on error.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %.80q: %v", expr, err)
	}
	return v
}
