package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// replacement prints what replacing the built-in Job controller with
// jobplane saves and costs, from runs of one side each
// (hack/bench-replacement.sh): in the built-in's runs kube-controller-manager
// runs its Job controller, in jobplane's it does not, as after a replacement.
// The Job controller's CPU is kube-controller-manager's with it less without
// it, so that whatever it does for the Jobs, including for Jobs it does not
// run, is counted; jobplane's is the executor's and the planner's in its own
// run less in the built-in's, where they follow the same kind of objects.
// That leaves out what jobplane's informers cost (as the side-by-side
// figures do) where the Job controller's share of kube-controller-manager's
// is in its figure, so the report also sets the executor's and the
// planner's whole CPU in their run against the Job controller's: all that
// a replacement adds, idle time included.
func replacement(args []string) error {
	fs := flag.NewFlagSet("replacement", flag.ContinueOnError)
	builtin := fs.String("builtin", "", "results files of the built-in's runs, comma-separated, one a round")
	jobplane := fs.String("jobplane", "", "results files of jobplane's runs, in the same rounds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rounds, err := replacementRounds(strings.Split(*builtin, ","), strings.Split(*jobplane, ","))
	if err != nil {
		return err
	}
	writeReplacement(os.Stdout, rounds)
	return nil
}

// replacementPair is one scenario at one QPS/burst pair, run by each side in
// its own cluster.
type replacementPair struct {
	round    int
	builtin  result // kube-controller-manager with its Job controller
	jobplane result // kube-controller-manager without it
}

func replacementRounds(builtinFiles, jobplaneFiles []string) ([]replacementPair, error) {
	if len(builtinFiles) != len(jobplaneFiles) {
		return nil, fmt.Errorf("%d built-in results files against %d of jobplane: one each a round", len(builtinFiles), len(jobplaneFiles))
	}
	var pairs []replacementPair
	for i := range builtinFiles {
		bs, err := readResults(builtinFiles[i])
		if err != nil {
			return nil, err
		}
		js, err := readResults(jobplaneFiles[i])
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			if b.Variant != "builtin" {
				continue
			}
			for _, j := range js {
				if j.Variant == "jobplane" && j.Scenario == b.Scenario && j.QPS == b.QPS {
					pairs = append(pairs, replacementPair{round: i + 1, builtin: b, jobplane: j})
				}
			}
		}
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no scenario run by both sides")
	}
	return pairs, nil
}

// jobControllerCPU is what the Job controller cost kube-controller-manager.
func (p replacementPair) jobControllerCPU() float64 { return p.builtin.KCMCPU - p.jobplane.KCMCPU }

// jobplaneCPU is what running the Jobs cost the executor and the planner.
func (p replacementPair) jobplaneCPU() float64 { return p.jobplane.JobplaneCPU - p.builtin.JobplaneCPU }

func writeReplacement(w io.Writer, pairs []replacementPair) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("| round | QPS/burst | scenario | create→Complete, built-in / jobplane (s) | kcm with / without its Job controller (s) | executor+planner running / following (s) | of which planner (s) | Job controller (ms/pod) | jobplane, running less following (ms/pod) | CPU, jobplane / built-in | jobplane, whole (ms/pod) | whole / built-in |\n")
	p("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range pairs {
		b, j := r.builtin, r.jobplane
		controller, running, whole := perPod(r.jobControllerCPU(), b.Pods), perPod(r.jobplaneCPU(), j.Pods), perPod(j.JobplaneCPU, j.Pods)
		p("| %d | %s | %s | %s / %s | %.2f / %.2f | %.2f / %.2f | %.2f | %.1f | %.1f | %s | %.1f | %s |\n", r.round, b.QPS, b.Scenario,
			secs(b.Seconds, b.TimedOut), secs(j.Seconds, j.TimedOut), b.KCMCPU, j.KCMCPU, j.JobplaneCPU, b.JobplaneCPU, j.PlannerCPU,
			1000*controller, 1000*running, ratio(running, controller), 1000*whole, ratio(whole, controller))
	}
}
