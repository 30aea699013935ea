package appserver

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the table a line diff fills (lines before × lines after): past it the
// diff is the whole file out and the whole file in, still a valid one.
const maxDiffCells = 1 << 20

// diffContext is the unchanged lines a hunk shows around its changes, as git's default.
const diffContext = 3

// unifiedDiff is the change of path from before to after (nil: absent) in git's unified
// format; "" when they are the same.
func unifiedDiff(path string, before, after []byte) string {
	if string(before) == string(after) {
		return ""
	}
	from, to := "a/"+path, "b/"+path
	if before == nil {
		from = "/dev/null"
	}
	if after == nil {
		to = "/dev/null"
	}
	a, b := lines(before), lines(after)
	ops := lineOps(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "diff --git a/%s b/%s\n--- %s\n+++ %s\n", path, path, from, to)
	// Hunks: runs of changes with diffContext equal lines either side, joined when they meet.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(len(ops), end+diffContext)
				break
			}
			end = run
		}
		hunk := ops[start:end]
		aStart, bStart, aLen, bLen := hunk[0].a, hunk[0].b, 0, 0
		for _, op := range hunk {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", span(aStart, aLen), span(bStart, bLen))
		for _, op := range hunk {
			out.WriteByte(op.kind)
			out.WriteString(op.text)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

// span is a hunk's range as the format writes it: its first line (from 1) and its length, the
// line before it when empty.
func span(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// lineOp is one line of a diff: ' ' kept, '-' removed, '+' added; a and b are the lines of
// before and after it comes at.
type lineOp struct {
	kind byte
	text string
	a, b int
}

// lineOps is a shortest edit from a to b by their longest common subsequence of lines.
func lineOps(a, b []string) []lineOp {
	var ops []lineOp
	if len(a)*len(b) > maxDiffCells {
		for i, l := range a {
			ops = append(ops, lineOp{'-', l, i, 0})
		}
		for j, l := range b {
			ops = append(ops, lineOp{'+', l, len(a), j})
		}
		return ops
	}
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, lineOp{' ', a[i], i, j})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			// Removed lines first, as git writes them.
			ops = append(ops, lineOp{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, lineOp{'+', b[j], i, j})
			j++
		}
	}
	return ops
}
