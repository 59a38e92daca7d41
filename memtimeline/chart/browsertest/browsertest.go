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

// OpenPage loads path in a fresh headless Chromium and returns a context
// to drive it and the report that fills while it runs. With checkClean,
// any problem the page had fails the test at its end.
func OpenPage(t testing.TB, path string, checkClean bool) (context.Context, *Report) {
	exe := FindChromium(t)
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 800),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, allocOpts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(ctx)
	t.Cleanup(cancelCtx)

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
