// Package site names a place in the user's code the one way every
// analysis, finding, diff and table does: a site is its innermost user
// frame ("train.py(42): step"), with the operator the user's code called
// when there is one ("train.py(42): step via aten::mm"); a Location is
// that frame as file, line and function. Library frames (torch, site
// packages) are passed over, so the same line matches across runs.
package site

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/chrometrace"
)

// Location is a line of the user's Python code. The one vocabulary for
// the two numbers a frame can carry: Line is the line that ran (an
// allocator snapshot records it), printed file:N; DefLine the line of the
// function's def (all a Kineto trace records of a frame: its
// "file(N): func" names the def), printed as "def line N". A frame string
// ("file(N): func") says which by its source: a trace's N is a def line,
// a snapshot's the running line; a Location never leaves it implicit.
type Location struct {
	File string `json:"file"`
	// Line is the running line; 0 when not recorded (a trace).
	Line     int    `json:"line"`
	Function string `json:"function,omitempty"`
	// DefLine is the line of Function's def when Line is not recorded
	// (a trace names frames by their def line); 0 unknown. Always
	// present, so that a location has one shape whatever file gave it.
	DefLine int `json:"def_line"`
}

// String is file:N for a running line, "file, def line N" when only the
// def line is known, and says so when neither is.
func (l *Location) String() string {
	switch {
	case l.Line > 0:
		return fmt.Sprintf("%s:%d", l.File, l.Line)
	case l.DefLine > 0:
		return fmt.Sprintf("%s, def line %d", l.File, l.DefLine)
	}
	return l.File + " (line not recorded)"
}

// FromTrace is l read from a trace's frame: a trace names a frame by its
// function's def line, or, for a frame already running when profiling
// began (preProfiled), by the line it was on at that moment; never by the
// line that ran. So Line is 0 (not recorded) and DefLine the number when
// it is a def line.
func (l *Location) FromTrace(preProfiled bool) *Location {
	if l == nil {
		return nil
	}
	out := *l
	if !preProfiled && out.Line > 0 {
		out.DefLine = out.Line
	}
	out.Line = 0
	return &out
}

// LocationOf returns the innermost user frame of a stack as file:line.
func LocationOf(stack []string) *Location {
	for i := len(stack) - 1; i >= 0; i-- {
		if chrometrace.IsLibraryFrame(stack[i]) {
			continue
		}
		if f, ok := chrometrace.ParseFrame(stack[i]); ok {
			return &Location{File: f.Filename, Line: f.Line, Function: f.Name}
		}
	}
	return nil
}

// Label names a site by its innermost user frame and outermost
// operator, so the same code line matches across runs.
func Label(frames []string, operator string) string {
	where := chrometrace.NoPythonStack
	for i := len(frames) - 1; i >= 0; i-- {
		if !chrometrace.IsLibraryFrame(frames[i]) {
			where = frames[i]
			break
		}
	}
	if where == chrometrace.NoPythonStack && len(frames) > 0 {
		where = frames[len(frames)-1]
	}
	if operator == "" {
		return where
	}
	return where + " via " + FirstOp(operator)
}

// Name names a site by its innermost user frame the one way (Label,
// without the operator), or by its operator when it has no Python stack.
func Name(stack []string, op string) string {
	if len(stack) == 0 {
		return FirstOp(op)
	}
	return Label(stack, "")
}

// FirstOp is the operator the user's code called: the outermost op of the
// chain, past record_function ranges ("Optimizer.step#Adam.step",
// "DistributedDataParallel.forward") that merely enclose it.
func FirstOp(chain string) string {
	if chain == "" {
		return "(no operator)"
	}
	ops := strings.Split(chain, " > ")
	for _, op := range ops {
		if strings.Contains(op, "::") {
			return op
		}
	}
	return ops[0]
}
