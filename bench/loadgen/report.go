package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseWrk reads wrk's output (run with --latency) into a result line.
func parseWrk(out string) (string, error) {
	rps, err := find(out, `Requests/sec:\s+([0-9.]+)`)
	if err != nil {
		return "", err
	}
	requests, err := find(out, `(\d+) requests in`)
	if err != nil {
		return "", err
	}
	var p [2]float64
	for i, q := range []string{"50", "99"} {
		v, err := findString(out, `(?m)^\s+`+q+`%\s+(\S+)`)
		if err != nil {
			return "", err
		}
		d, err := time.ParseDuration(strings.Replace(v, "us", "µs", 1))
		if err != nil {
			return "", fmt.Errorf("wrk latency %s%%: %w", q, err)
		}
		p[i] = float64(d) / float64(time.Millisecond)
	}
	var errs float64
	if m := regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`).FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseFloat(s, 64) // the pattern admits digits only
			errs += n
		}
	}
	if non2xx, err := find(out, `Non-2xx or 3xx responses: (\d+)`); err == nil {
		errs += non2xx
	}
	return resultLine(requests, errs, rps, p[0], p[1]), nil
}

// parseH2load reads h2load's summary and its --log-file (one line per
// request: start µs, status, duration µs); h2load prints no percentiles.
func parseH2load(out string, log io.Reader) (string, error) {
	rps, err := find(out, `finished in \S+, ([0-9.]+) req/s`)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`).FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("h2load output has no requests line")
	}
	var n [4]float64
	for i, s := range m[1:] {
		n[i], _ = strconv.ParseFloat(s, 64) // the pattern admits digits only
	}
	var r result
	sc := bufio.NewScanner(log)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.HasPrefix(f[1], "2") {
			continue
		}
		us, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return "", fmt.Errorf("h2load log line %q: %w", sc.Text(), err)
		}
		r.latencies = append(r.latencies, time.Duration(us)*time.Microsecond)
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	slices.Sort(r.latencies)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return resultLine(n[0], n[1]+n[2]+n[3], rps, ms(r.percentile(0.5)), ms(r.percentile(0.99))), nil
}

func resultLine(requests, errors, rps, p50, p99 float64) string {
	return fmt.Sprintf("requests=%.0f errors=%.0f rps=%.1f p50_ms=%.3f p99_ms=%.3f", requests, errors, rps, p50, p99)
}

func find(s, pattern string) (float64, error) {
	v, err := findString(s, pattern)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(v, 64)
}

func findString(s, pattern string) (string, error) {
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("no match for %q in the tool's output", pattern)
	}
	return m[1], nil
}

// parseCmd is "loadgen parse wrk|h2load OUTPUT [H2LOAD-LOG]".
func parseCmd(args []string) error {
	if len(args) < 2 || (args[0] == "h2load") != (len(args) == 3) || len(args) > 3 {
		return fmt.Errorf("usage: loadgen parse wrk OUTPUT | h2load OUTPUT LOG")
	}
	out, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	var line string
	switch args[0] {
	case "wrk":
		line, err = parseWrk(string(out))
	case "h2load":
		var log *os.File
		if log, err = os.Open(args[2]); err != nil {
			return err
		}
		defer log.Close()
		line, err = parseH2load(string(out), log)
	default:
		err = fmt.Errorf("unknown tool %q", args[0])
	}
	if err != nil {
		return fmt.Errorf("parse %s: %w", args[1], err)
	}
	fmt.Println(line)
	return nil
}

// A sample is one measurement: "SCENARIO PROXY ROUND key=value…", or
// "SCENARIO PROXY n/a REASON…" for a pair that was not measured.
type sample struct {
	scenario, proxy, na string
	v                   map[string]float64
}

func readSamples(r io.Reader) ([]sample, error) {
	var all []sample
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 4 {
			return nil, fmt.Errorf("results line %d: want SCENARIO PROXY ROUND key=value… or SCENARIO PROXY n/a REASON", line)
		}
		s := sample{scenario: f[0], proxy: f[1]}
		if f[2] == "n/a" {
			s.na = strings.Join(f[3:], " ")
			all = append(all, s)
			continue
		}
		s.v = map[string]float64{}
		for _, kv := range f[3:] {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("results line %d: %q is not key=number", line, kv)
			}
			s.v[k] = n
		}
		for _, k := range []string{"rps", "p50_ms", "p99_ms"} {
			if _, ok := s.v[k]; !ok {
				return nil, fmt.Errorf("results line %d: no %s", line, k)
			}
		}
		all = append(all, s)
	}
	return all, sc.Err()
}

// stat is one (scenario, proxy) over its rounds.
type stat struct {
	na                 string
	rps, p50, p99, cpu []float64
	// cpuPerReq is each round's CPU time of the proxy per request, in µs.
	cpuPerReq      []float64
	errors, rounds float64
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// table prints the Markdown table: medians over the rounds with their
// range, and ratios to nginx's medians of the same scenario in the same
// run. Scenarios and proxies keep the order they first appear in.
func table(w io.Writer, samples []sample, baseline string) {
	var scenarios, proxies []string
	stats := map[[2]string]*stat{}
	for _, s := range samples {
		if !slices.Contains(scenarios, s.scenario) {
			scenarios = append(scenarios, s.scenario)
		}
		if !slices.Contains(proxies, s.proxy) {
			proxies = append(proxies, s.proxy)
		}
		key := [2]string{s.scenario, s.proxy}
		st := stats[key]
		if st == nil {
			st = &stat{}
			stats[key] = st
		}
		if s.na != "" {
			st.na = s.na
			continue
		}
		st.rounds++
		st.rps = append(st.rps, s.v["rps"])
		st.p50 = append(st.p50, s.v["p50_ms"])
		st.p99 = append(st.p99, s.v["p99_ms"])
		if c, ok := s.v["cpu_pct"]; ok {
			st.cpu = append(st.cpu, c)
			if s.v["rps"] > 0 {
				st.cpuPerReq = append(st.cpuPerReq, c*1e4/s.v["rps"])
			}
		}
		st.errors += s.v["errors"]
	}
	fmt.Fprintf(w, "| scenario | proxy | requests/s median (min–max) | p50 ms | p99 ms median (min–max) | req/s ÷ %[1]s | p99 ÷ %[1]s | proxy CPU | CPU per request | errors | rounds |\n", baseline)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, sc := range scenarios {
		base := stats[[2]string{sc, baseline}]
		for _, p := range proxies {
			st := stats[[2]string{sc, p}]
			switch {
			case st == nil:
				continue
			case st.na != "" || st.rounds == 0:
				fmt.Fprintf(w, "| %s | %s | n/a: %s | | | | | | | | |\n", sc, p, st.na)
				continue
			}
			ratio := func(v []float64, bv []float64) string {
				if base == nil || base.na != "" || base.rounds == 0 || median(bv) == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f×", median(v)/median(bv))
			}
			var baseRPS, baseP99 []float64
			if base != nil {
				baseRPS, baseP99 = base.rps, base.p99
			}
			cpu, perReq := "–", "–"
			if len(st.cpu) > 0 {
				cpu = fmt.Sprintf("%.0f%%", median(st.cpu))
			}
			if len(st.cpuPerReq) > 0 {
				perReq = fmt.Sprintf("%.1f µs", median(st.cpuPerReq))
			}
			fmt.Fprintf(w, "| %s | %s | %s (%s–%s) | %.2f | %.2f (%.2f–%.2f) | %s | %s | %s | %s | %.0f | %.0f |\n",
				sc, p, thousands(median(st.rps)), thousands(slices.Min(st.rps)), thousands(slices.Max(st.rps)),
				median(st.p50), median(st.p99), slices.Min(st.p99), slices.Max(st.p99),
				ratio(st.rps, baseRPS), ratio(st.p99, baseP99), cpu, perReq, st.errors, st.rounds)
		}
	}
}

// thousands formats a rate as a whole number with comma separators.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// tableCmd is "loadgen table RESULTS [BASELINE]".
func tableCmd(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("usage: loadgen table RESULTS [BASELINE-PROXY]")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	samples, err := readSamples(f)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	baseline := "nginx"
	if len(args) == 2 {
		baseline = args[1]
	}
	table(os.Stdout, samples, baseline)
	return nil
}
