// Package more writes a long list the one way torchmem does: the first
// few items, then how many were left out ("a, b, c and 4 more").
package more

import (
	"fmt"
	"strings"
)

// Join joins the first n items with sep and, when there are more, says
// how many: Join([a b c d e], 3, ", ") is "a, b, c and 2 more". n <= 0
// joins them all.
func Join(items []string, n int, sep string) string {
	if n <= 0 || len(items) <= n {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], sep), len(items)-n)
}
