package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The start-up budget, stated once: a whole `undolog version` at most
// versionTarget times a static Go hello, and the packages' init (every
// package's, summed as GODEBUG=inittrace=1 reports them) at most
// initTarget times the hello's whole process, each measured side by side
// with the hello in the same round.
const (
	versionTarget = 3.0
	initTarget    = 2.0
)

// startup is one measure of the budget: medians over the rounds of
// undolog version's whole process, its package init, undolog's binary doing
// nothing and a static hello, in ms, and the ratios the targets bound.
type startup struct {
	version, init, linked, hello float64
	versionRatio, initRatio      float64
	linkedRatio                  float64
}

// measureStartup times, in rounds of n processes of each side taken in
// turns, undolog version, the package init of undolog version, undolog's
// binary doing nothing (linked) and a static Go hello.
func measureStartup(bin, linked, hello string, nRounds, n int) (startup, error) {
	timeOne := func(argv ...string) (float64, error) {
		start := time.Now()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%v: %v\n%.300s", argv, err, out)
		}
		return float64(time.Since(start).Microseconds()) / 1000, nil
	}
	var r [][]float64
	for i := 0; i < nRounds; i++ {
		var version, inits, link, hi []float64
		for k := 0; k < n; k++ {
			v, err := timeOne(bin, "version")
			if err != nil {
				return startup{}, err
			}
			in, err := initTime(bin, "version")
			if err != nil {
				return startup{}, err
			}
			l, err := timeOne(linked)
			if err != nil {
				return startup{}, err
			}
			h, err := timeOne(hello)
			if err != nil {
				return startup{}, err
			}
			version, inits, link, hi = append(version, v), append(inits, in), append(link, l), append(hi, h)
		}
		r = append(r, []float64{median(version), median(inits), median(link), median(hi)})
	}
	rs := rounds(r)
	return startup{
		version: rs.median(0), init: rs.median(1), linked: rs.median(2), hello: rs.median(3),
		versionRatio: rs.ratio(0, 3), initRatio: rs.ratio(1, 3), linkedRatio: rs.ratio(2, 3),
	}, nil
}

// initTime runs argv under GODEBUG=inittrace=1 and returns the clock time
// of every package's init, summed, in ms.
func initTime(argv ...string) (float64, error) {
	inits, err := packageInits(argv...)
	total := 0.0
	for _, in := range inits {
		total += in.ms
	}
	return total, err
}

// packageInit is one package's init as GODEBUG=inittrace=1 reports it.
type packageInit struct {
	pkg    string
	ms     float64
	allocs int
}

// packageInits runs argv under GODEBUG=inittrace=1 and returns each
// package's init.
func packageInits(argv ...string) ([]packageInit, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %v\n%.300s", argv, err, stderr.String())
	}
	// init PACKAGE @T ms, C ms clock, B bytes, A allocs
	var inits []packageInit
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || f[6] != "clock," || f[10] != "allocs" {
			continue
		}
		ms, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("inittrace line %q: %v", sc.Text(), err)
		}
		allocs, err := strconv.Atoi(f[9])
		if err != nil {
			return nil, fmt.Errorf("inittrace line %q: %v", sc.Text(), err)
		}
		inits = append(inits, packageInit{pkg: f[1], ms: ms, allocs: allocs})
	}
	if len(inits) == 0 {
		return nil, fmt.Errorf("%v under GODEBUG=inittrace=1 reported no init", argv)
	}
	return inits, nil
}

// startupRows adds the start-up budget's rows, each with its target.
func startupRows(add func(what, value, ratio string), bin, linked, hello string) error {
	s, err := measureStartup(bin, linked, hello, *runs, 40)
	if err != nil {
		return err
	}
	add("process: undolog version", fmt.Sprintf("%.2f ms", s.version),
		fmt.Sprintf("%.2fx a static Go hello (target at most %.1fx: %s)", s.versionRatio, versionTarget, verdict(s.versionRatio, versionTarget)))
	add("undolog version: package init, summed (GODEBUG=inittrace=1)", fmt.Sprintf("%.2f ms", s.init),
		fmt.Sprintf("%.2fx a static Go hello's whole process (target at most %.1fx: %s)", s.initRatio, initTarget, verdict(s.initRatio, initTarget)))
	add("process: undolog's binary doing nothing", fmt.Sprintf("%.2f ms", s.linked), fmt.Sprintf("%.2fx a static Go hello", s.linkedRatio))
	add("process: static Go hello", fmt.Sprintf("%.2f ms", s.hello), "")
	return nil
}

func verdict(ratio, target float64) string {
	if ratio <= target {
		return "met"
	}
	return "MISSED"
}
