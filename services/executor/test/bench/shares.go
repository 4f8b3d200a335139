package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// shareCategories classify a CPU sample by its stack, the first that
// matches: what each side's share of a run (its own run's profile less its
// profile following the other side's run) is spent on.
var shareCategories = []struct {
	name  string
	stack *regexp.Regexp
}{
	{"the planner hop, executor side (snapshots, the stream)", regexp.MustCompile(`plannerclient\.|jobplane/lib/plan\.`)},
	{"events", regexp.MustCompile(`recordToSink|eventBroadcaster|record\.\(\*recorder\)`)},
	{"API requests (writing them, reading the answers)", regexp.MustCompile(`rest\.\(\*Request\)\.(Do|request|Body)|rest\.Result\.|http2\.\(\*ClientConn\)\.readLoop|http2\.\(\*clientStream\)|net/http\.\(\*Transport\)`)},
	{"informers (watch decoding, handlers, caches)", regexp.MustCompile(`StreamWatcher\)\.receive|Reflector|DeltaFIFO|processorListener|HandleDeltas|sharedIndexInformer`)},
	{"garbage collector", regexp.MustCompile(`gcBgMarkWorker|bgsweep|bgscavenge|gcAssistAlloc|gcStart|markroot`)},
	{"scheduler (finding and waking goroutines)", regexp.MustCompile(`runtime\.mcall|runtime\.schedule|findRunnable|runtime\.mstart|sysmon`)},
	{"controller logic (syncs, queue)", regexp.MustCompile(`services/executor/internal|pkg/controller/job|workqueue`)},
}

const otherCategory = "other"

// shares prints, for one scenario of a run profiled by
// PROFILE_SECONDS, each side's CPU share by category as a markdown table.
func shares(args []string) error {
	fs := flag.NewFlagSet("shares", flag.ContinueOnError)
	dir := fs.String("run", "", "the run's directory (hack/bench-executor.sh's results directory)")
	scenario := fs.String("scenario", "many", "big, many or tenants")
	label := fs.String("qps", "200-300", "the QPS pair, as in the profiles' names")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-run is required")
	}
	file := func(service, suffix string) string {
		return filepath.Join(*dir, fmt.Sprintf("%s-cpu-%s-%s%s.pprof", service, *scenario, *label, suffix))
	}
	builtin, err := profileShare(file("kcm", "-builtin"), file("kcm", ""))
	if err != nil {
		return err
	}
	executor, err := profileShare(file("executor", ""), file("executor", "-builtin"))
	if err != nil {
		return err
	}
	planner, err := profileShare(file("planner", ""), file("planner", "-builtin"))
	if err != nil {
		return err
	}
	fmt.Printf("| %s, %s: CPU beyond following | built-in | jobplane |\n|---|---:|---:|\n", *scenario, strings.ReplaceAll(*label, "-", "/"))
	for _, c := range append(shareCategoryNames(), otherCategory) {
		fmt.Printf("| %s | %.2f s | %.2f s |\n", c, builtin[c].Seconds(), executor[c].Seconds())
	}
	fmt.Printf("| the planner (its process) | – | %.2f s |\n", total(planner).Seconds())
	fmt.Printf("| **total** | **%.2f s** | **%.2f s** |\n", total(builtin).Seconds(), (total(executor) + total(planner)).Seconds())
	return nil
}

func shareCategoryNames() []string {
	names := make([]string, len(shareCategories))
	for i, c := range shareCategories {
		names[i] = c.name
	}
	return names
}

func total(m map[string]time.Duration) time.Duration {
	var t time.Duration
	for _, v := range m {
		t += v
	}
	return t
}

// profileShare is own's CPU by category less following's; a missing or
// empty profile (a side that did nothing) counts as none.
func profileShare(own, following string) (map[string]time.Duration, error) {
	a, err := profileCategories(own)
	if err != nil {
		return nil, err
	}
	b, err := profileCategories(following)
	if err != nil {
		return nil, err
	}
	for c, v := range b {
		a[c] -= v
	}
	return a, nil
}

func profileCategories(path string) (map[string]time.Duration, error) {
	cats := map[string]time.Duration{}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		return cats, nil
	}
	out, err := exec.Command("go", "tool", "pprof", "-traces", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -traces %s: %w", path, err)
	}
	err = eachTrace(strings.NewReader(string(out)), func(value time.Duration, stack string) {
		cats[categoryOf(stack)] += value
	})
	return cats, err
}

func categoryOf(stack string) string {
	for _, c := range shareCategories {
		if c.stack.MatchString(stack) {
			return c.name
		}
	}
	return otherCategory
}

// sampleValue is the value at the head of a trace of go tool pprof -traces:
// "     10ms   runtime.futex".
var sampleValue = regexp.MustCompile(`^\s*([0-9.]+)(ms|s)\s`)

// eachTrace calls f with each trace of go tool pprof -traces output: its
// CPU and its stack, one function a line. Traces are separated by dashed
// lines.
func eachTrace(r io.Reader, f func(time.Duration, string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var value time.Duration
	var stack strings.Builder
	flush := func() {
		if stack.Len() > 0 {
			f(value, stack.String())
		}
		value = 0
		stack.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			continue
		}
		if m := sampleValue.FindStringSubmatch(line); m != nil && stack.Len() == 0 {
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return err
			}
			unit := time.Second
			if m[2] == "ms" {
				unit = time.Millisecond
			}
			value = time.Duration(v * float64(unit))
		}
		if value > 0 {
			stack.WriteString(strings.TrimSpace(line))
			stack.WriteByte('\n')
		}
	}
	flush()
	return sc.Err()
}
