package job

import (
	"sort"
	"strconv"
	"strings"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
)

// unknownIndex marks a pod without a valid completion index.
const unknownIndex = -1

// interval is a closed range of completion indexes.
type interval struct{ first, last int }

// intervals is a sorted, non-overlapping, non-adjacent list of ranges: the
// form of status.completedIndexes ("1,3-5,7").
type intervals []interval

func (iv intervals) total() int {
	n := 0
	for _, i := range iv {
		n += i.last - i.first + 1
	}
	return n
}

func (iv intervals) has(ix int) bool {
	k := sort.Search(len(iv), func(k int) bool { return iv[k].last >= ix })
	return k < len(iv) && iv[k].first <= ix
}

func (iv intervals) String() string {
	var b strings.Builder
	for k, i := range iv {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i.first))
		if i.last > i.first {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(i.last))
		}
	}
	return b.String()
}

// with returns iv plus the indexes (any order, duplicates allowed), in
// canonical form. iv itself is not changed.
func (iv intervals) with(indexes []int) intervals {
	all := make([]interval, 0, len(iv)+len(indexes))
	all = append(all, iv...)
	for _, ix := range indexes {
		all = append(all, interval{ix, ix})
	}
	return canonical(all)
}

// canonical sorts and merges overlapping or adjacent ranges; all is reused.
func canonical(all []interval) intervals {
	sort.Slice(all, func(a, b int) bool { return all[a].first < all[b].first })
	var out intervals
	for _, i := range all {
		if n := len(out); n > 0 && i.first <= out[n-1].last+1 {
			out[n-1].last = max(out[n-1].last, i.last)
			continue
		}
		out = append(out, i)
	}
	return out
}

// parseIntervals reads status.completedIndexes, dropping anything malformed
// and clipping at completions (completions may have been scaled down).
func parseIntervals(s string, completions int) intervals {
	if s == "" {
		return nil
	}
	var all []interval
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 || first >= completions {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				continue
			}
		}
		all = append(all, interval{first, min(last, completions-1)})
	}
	return canonical(all)
}

func isIndexed(job *batch.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batch.IndexedCompletion
}

// completionIndex reads a pod's index annotation; unknownIndex if absent
// or malformed.
func completionIndex(p *v1.Pod) int {
	v, ok := p.Annotations[batch.JobCompletionIndexAnnotation]
	if !ok {
		return unknownIndex
	}
	ix, err := strconv.Atoi(v)
	if err != nil || ix < 0 {
		return unknownIndex
	}
	return ix
}

// validIndex: the pod has an index inside [0, completions).
func validIndex(job *batch.Job, p *v1.Pod) bool {
	ix := completionIndex(p)
	return ix != unknownIndex && ix < int(*job.Spec.Completions)
}

// pendingIndexes returns up to count of the lowest indexes that are
// neither succeeded nor held by a non-finished pod (active, or, under
// podReplacementPolicy Failed, still terminating).
func pendingIndexes(succeeded intervals, busy []int, count, completions int) []int {
	taken := succeeded.with(busy)
	out := make([]int, 0, count)
	candidate := 0
	for _, i := range taken {
		for ; candidate < completions && len(out) < count && candidate < i.first; candidate++ {
			out = append(out, candidate)
		}
		candidate = max(candidate, i.last+1)
	}
	for ; candidate < completions && len(out) < count; candidate++ {
		out = append(out, candidate)
	}
	return out
}

// duplicateIndexPods returns, of the active pods, those whose index is
// invalid or already held by another active pod (the one kept per index is
// the first in pods' order); those go before any other deletion.
func duplicateIndexPods(job *batch.Job, pods []*v1.Pod) (dup, rest []*v1.Pod) {
	seen := map[int]bool{}
	for _, p := range pods {
		ix := completionIndex(p)
		if !validIndex(job, p) || seen[ix] {
			dup = append(dup, p)
			continue
		}
		seen[ix] = true
		rest = append(rest, p)
	}
	return dup, rest
}
