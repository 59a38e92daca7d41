// Package browsertest (test support only) loads pages in a real headless Chromium through the
// DevTools protocol and records what they did: every request, console
// error, exception and dialog. Tests of the chart and of the HTML report
// share it.
package browsertest
