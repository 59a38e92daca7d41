package browsertest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
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

// shared is the one headless Chromium of a test binary: starting a browser
// takes one to several seconds of CPU, so each page gets a tab of its own
// (in a BrowserContext of its own: no storage, cache or cookie shared with
// another test's page) in one browser, which Close stops.
var shared struct {
	mu      sync.Mutex
	ctx     context.Context // the browser's first tab; its children are new tabs
	cancel  func()
	dataDir string
	err     error
}

// browser returns the shared browser's context, starting it the first time.
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
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(dir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	// The first Run starts the browser and binds it to ctx (no timeout:
	// later tabs put their own).
	if err := chromedp.Do(ctx); err != nil {
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(dir)
		return err
	}
	shared.ctx, shared.dataDir = ctx, dir
	shared.cancel = func() { cancelCtx(); cancelAlloc() }
	return nil
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

// OpenPage loads path in a new tab of the shared headless Chromium (in a
// fresh BrowserContext, a new window of 1280x800) and returns a context to
// drive it and the report that fills while it runs. With checkClean, any
// problem the page had fails the test at its end.
func OpenPage(t testing.TB, path string, checkClean bool) (context.Context, *Report) {
	exe := FindChromium(t)
	ctx, cancel := context.WithTimeout(browser(t, exe), 90*time.Second)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelTab)

	rep := &Report{}
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			rep.add(&rep.requests, e.Request.URL)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				rep.add(&rep.errors, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			rep.add(&rep.errors, "exception: "+msg)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				rep.add(&rep.errors, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *page.EventJavascriptDialogOpening:
			rep.add(&rep.dialogs, string(e.Type)+": "+e.Message)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false}) //nolint:errcheck
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	pageURL := (&url.URL{Scheme: "file", Path: path}).String()
	// chromedp enables the log and network domains itself; console events
	// need the runtime domain.
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("runtime.enable: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(".torchmem-chart canvas")),
	); err != nil {
		t.Fatalf("loading %s in %s: %v", pageURL, exe, err)
	}
	rep.pageURL = pageURL
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
