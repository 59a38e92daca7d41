package browsertest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
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

// shared is the one headless Chromium of a test binary and its tabs.
// Starting a browser takes seconds of CPU, and so does each new tab (a
// BrowserContext and renderer processes of its own cost more than the
// report's page itself), so pages load in tabs that are kept and reused:
// OpenPage takes a free tab (the browser's first, or one it opens when all
// are held, up to one per test that may run at once: GOMAXPROCS, go test's
// default -parallel) and holds it until the test ends, when the tab goes
// to a blank page and back to the free ones. Pages keep nothing between
// them (the reports use no storage, cookie or cache; each load is a new
// document), and what a tab reports (requests, errors, dialogs) goes to
// the test that holds it. Close stops the browser.
var shared struct {
	mu      sync.Mutex // guards the fields below
	ctx     context.Context
	cancel  func()
	dataDir string
	blank   string // a page with nothing on it, where free tabs wait
	err     error
	tabs    int       // tabs opened
	free    chan *tab // tabs no test holds
}

// tab is one tab of the shared browser.
type tab struct {
	ctx     context.Context
	mu      sync.Mutex
	current *Report // the holder's report: the tab's events go there
}

func (tb *tab) setReport(r *Report) {
	tb.mu.Lock()
	tb.current = r
	tb.mu.Unlock()
}

// takeTab returns a free tab of the shared browser, starting the browser
// the first time and opening a tab when every tab is held and fewer than
// GOMAXPROCS are open; otherwise it waits for one.
func takeTab(t testing.TB, exe string) *tab {
	t.Helper()
	shared.mu.Lock()
	if shared.ctx == nil && shared.err == nil {
		shared.err = startBrowser(exe)
	}
	if shared.err != nil {
		shared.mu.Unlock()
		t.Fatalf("starting %s: %v", exe, shared.err)
	}
	select {
	case tb := <-shared.free:
		shared.mu.Unlock()
		return tb
	default:
	}
	if shared.tabs < cap(shared.free) {
		shared.tabs++
		ctx := shared.ctx
		shared.mu.Unlock()
		tabCtx, _ := chromedp.NewContext(ctx) // closed with the browser
		tb, err := newTab(tabCtx)
		if err != nil {
			t.Fatalf("opening a tab in %s: %v", exe, err)
		}
		return tb
	}
	free := shared.free
	shared.mu.Unlock()
	return <-free
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
	first, err := newTab(ctx)
	if err != nil {
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(dir)
		return err
	}
	shared.ctx, shared.dataDir, shared.blank = ctx, dir, blank
	shared.cancel = func() { cancelCtx(); cancelAlloc() }
	shared.tabs = 1
	shared.free = make(chan *tab, max(1, goruntime.GOMAXPROCS(0)))
	shared.free <- first
	return nil
}

// newTab attaches to the tab of ctx (opening it) and sends its events to
// the report of the test holding it.
func newTab(ctx context.Context) (*tab, error) {
	tb := &tab{ctx: ctx}
	if err := chromedp.Do(ctx); err != nil {
		return nil, err
	}
	err := chromedp.Listen(ctx, func(ev any) {
		tb.mu.Lock()
		rep := tb.current
		tb.mu.Unlock()
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
	return tb, err
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
	shared.ctx, shared.cancel, shared.err, shared.tabs, shared.free = nil, nil, nil, 0, nil
}

// OpenPage loads path in a tab of the shared headless Chromium (a window
// of 1280x800), which the test holds until it ends, and returns a context to drive it and the report that fills
// while it runs. With checkClean, any problem the page had fails the test
// at its end. A test opens one page.
func OpenPage(t testing.TB, path string, checkClean bool) (context.Context, *Report) {
	exe := FindChromium(t)
	tb := takeTab(t, exe)
	rep := &Report{}
	tb.setReport(rep)
	ctx, cancel := context.WithTimeout(tb.ctx, 90*time.Second)
	t.Cleanup(func() {
		// The page goes (its timers and pending requests with it) before
		// the next test's page comes; what it does meanwhile is nobody's.
		tb.setReport(nil)
		blankCtx, cancelBlank := context.WithTimeout(tb.ctx, 30*time.Second)
		err := chromedp.Do(blankCtx, chromedp.Navigate((&url.URL{Scheme: "file", Path: shared.blank}).String()))
		cancelBlank()
		cancel()
		shared.free <- tb
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
