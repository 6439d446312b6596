package cost

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/nvcomm/nvcomm/internal/plan"
)

// DefaultMinFitBytes is the smallest message [Fit] uses: below 1 MiB the
// time is torch.distributed's launch overhead, not the link.
const DefaultMinFitBytes = 1 << 20

// MinFitFlops is the smallest product [Fit] fits the compute line to
// (2·1024³ operations, a 1024-sided product): smaller ones are
// launch-bound, and their times scatter by shape (6–27 µs on an H200)
// more than by size, so a line held to them bends away from the products
// that matter. The line's α still predicts them within about 60%.
const MinFitFlops = 2 << 30

// FitOptions tune [Fit].
type FitOptions struct {
	// MinBytes is the smallest message size fitted; zero means
	// [DefaultMinFitBytes].
	MinBytes int64
	// DevicesPerNode goes into the topology; zero means 8.
	DevicesPerNode int
	// Name and Source go into the topology.
	Name, Source string
	// Base supplies what the samples do not measure (memory, and the
	// network when no sample has link network); nil means [Default].
	Base *Topology
}

// FitPoint is one sample with the fitted model's prediction.
type FitPoint struct {
	Sample
	Predicted float64
	// Used is false for samples below MinBytes and for outliers.
	Used bool
	// Outlier marks a sample slower than twice some larger message of the
	// same collective, link and ranks: a timing glitch, since a larger
	// message never takes less time.
	Outlier bool
}

// RelErr is the prediction's relative error, (predicted − measured) /
// measured.
func (p FitPoint) RelErr() float64 { return p.Predicted/p.Seconds - 1 }

// Fit fits the model (see [Params]) per link class and collective type to
// samples, minimizing the largest relative error over the used samples
// (see fitParams), and returns the topology and every sample with its
// prediction. A type with samples gets its own parameters; Gather and
// Scatter without samples take SendRecv's (PyTorch runs them as
// point-to-point transfers); the link's defaults, for types not measured,
// are one line fitted to all its used samples together.
func Fit(samples []Sample, o FitOptions) (*Topology, []FitPoint, error) {
	o = o.withDefaults()
	t := *o.Base
	t.Format, t.Name, t.Source, t.DevicesPerNode = TopologyFormat, o.Name, o.Source, o.DevicesPerNode
	points := markUsed(samples, o.MinBytes)
	if !slices.ContainsFunc(points, func(p FitPoint) bool { return p.Used }) {
		return nil, nil, fmt.Errorf("no sample of %d bytes or more to fit", o.MinBytes)
	}
	if err := fitMemory(&t, points); err != nil {
		return nil, nil, err
	}
	fitCompute(&t, points)
	for _, link := range []string{LinkNVLink, LinkNetwork} {
		l, ok, err := fitLink(points, link)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		if link == LinkNVLink {
			t.NVLink = l
		} else {
			t.Network = l
		}
	}
	for i := range points {
		p := &points[i]
		if p.Link == LinkMemory {
			p.Predicted = t.Pass(p.Collective, p.Bytes, 1)
			continue
		}
		if p.Link == LinkCompute {
			p.Predicted = t.Compute.Seconds(p.Collective, float64(p.Bytes))
			continue
		}
		p.Predicted = t.Collective(p.Link, p.Collective, p.Bytes, p.Ranks)
	}
	return &t, points, nil
}

// fitMemory fits the memory parameters to the local copies among the
// samples, when there are: copy gives memory's own (a contiguous copy),
// permute memory.strided.
func fitMemory(t *Topology, points []FitPoint) error {
	for _, pass := range []string{PassCopy, PassStrided} {
		var used []FitPoint
		for _, p := range points {
			if p.Used && p.Link == LinkMemory && p.Collective == pass {
				used = append(used, p)
			}
		}
		if len(used) == 0 {
			continue
		}
		params, err := fitParams(used)
		if err != nil {
			return fmt.Errorf("memory %s: %w", pass, err)
		}
		if pass == PassCopy {
			t.Memory.Params = params
		} else {
			t.Memory.Strided = &params
		}
	}
	return nil
}

// fitCompute fits, per dtype with matmul samples among the used ones, the
// topology's compute line α + F / throughput to them, minimizing the
// largest relative error as a link's line is fitted; a dtype measured at
// one size only gets its fastest sample's throughput and no α. Dtypes
// without samples keep the base topology's.
func fitCompute(t *Topology, points []FitPoint) {
	byType := map[string][]FitPoint{}
	for _, p := range points {
		if p.Used && p.Link == LinkCompute {
			byType[p.Collective] = append(byType[p.Collective], p)
		}
	}
	if len(byType) == 0 {
		return
	}
	c := Compute{TFLOPS: map[string]float64{}, Latency: map[string]float64{}}
	if t.Compute != nil {
		maps.Copy(c.TFLOPS, t.Compute.TFLOPS)
		maps.Copy(c.Latency, t.Compute.Latency)
	}
	for dt, ps := range byType {
		c.TFLOPS[dt], c.Latency[dt] = fitComputeLine(ps)
	}
	maps.DeleteFunc(c.Latency, func(_ string, a float64) bool { return a == 0 })
	t.Compute = &c
}

// fitComputeLine fits one dtype's compute line to its samples: the
// throughput in TFLOPS and α in microseconds.
func fitComputeLine(ps []FitPoint) (tflops, latency float64) {
	xs, ts := sortedByX(ps)
	for i := range xs {
		xs[i] /= 1e3 // kiloflops per nanosecond are TFLOPS, the line's bandwidth unit
	}
	if distinct(xs) >= 2 {
		if l, err := fitLine(xs, ts); err == nil {
			return l.Bandwidth, l.Latency
		}
	}
	for _, p := range ps {
		tflops = max(tflops, float64(p.Bytes)/p.Seconds/1e12)
	}
	return round(tflops, 1), 0
}

func (o FitOptions) withDefaults() FitOptions {
	if o.MinBytes <= 0 {
		o.MinBytes = DefaultMinFitBytes
	}
	if o.DevicesPerNode <= 0 {
		o.DevicesPerNode = 8
	}
	if o.Base == nil {
		o.Base = Default()
	}
	if o.Name == "" {
		o.Name = "fitted"
	}
	return o
}

// markUsed flags the samples the fit uses: at least minBytes and not
// outliers.
func markUsed(samples []Sample, minBytes int64) []FitPoint {
	points := make([]FitPoint, len(samples))
	for i, s := range samples {
		points[i] = FitPoint{Sample: s}
		for _, o := range samples {
			if o.Collective == s.Collective && o.Link == s.Link && o.Ranks == s.Ranks && o.Bytes > s.Bytes && 2*o.Seconds < s.Seconds {
				points[i].Outlier = true
			}
		}
		least := minBytes
		if s.Link == LinkCompute {
			least = MinFitFlops
		}
		points[i].Used = s.Bytes >= least && !points[i].Outlier
	}
	return points
}

// fitLink fits one link class; ok is false when no sample uses it.
func fitLink(points []FitPoint, link string) (Link, bool, error) {
	var all []FitPoint
	byType := map[string][]FitPoint{}
	for _, p := range points {
		if p.Used && p.Link == link {
			all = append(all, p)
			byType[p.Collective] = append(byType[p.Collective], p)
		}
	}
	if len(all) == 0 {
		return Link{}, false, nil
	}
	def, err := fitLine(sortedByX(all))
	if err != nil {
		return Link{}, false, fmt.Errorf("%s: %w", link, err)
	}
	l := Link{Params: Params{Bandwidth: def.Bandwidth, Latency: def.Latency}, Collectives: map[string]Params{}}
	// The types are independent fits of a second or so each: run them at once.
	types := slices.Sorted(maps.Keys(byType))
	fits, errs := make([]Params, len(types)), make([]error, len(types))
	var wg sync.WaitGroup
	for i, typ := range types {
		wg.Go(func() { fits[i], errs[i] = fitParams(byType[typ]) })
	}
	wg.Wait()
	for i, typ := range types {
		if errs[i] != nil {
			return Link{}, false, fmt.Errorf("%s %s: %w", link, typ, errs[i])
		}
		l.Collectives[typ] = fits[i]
	}
	for _, typ := range []string{plan.Gather, plan.Scatter} {
		if _, ok := l.Collectives[typ]; !ok {
			if p, ok := l.Collectives[plan.SendRecv]; ok {
				l.Collectives[typ] = p
			}
		}
	}
	return l, true, nil
}

// fitParams fits the model to points, minimizing the largest relative
// error (a Chebyshev fit: the band the model is held to). Sorted by x, the
// points fall into runs, one for each piece of the model: the k smallest
// messages at the floor λ, the next ones on the low-latency line, the rest
// on the main line. Every split is fitted (each line by fitLine, λ by
// floorFor) and scored on all points; a floor (one parameter) or a
// low-latency line (two) is kept only when it lowers the largest error by
// two points per parameter it adds.
func fitParams(points []FitPoint) (Params, error) {
	xs, ts := sortedByX(points)
	if distinct(xs) < 2 {
		return Params{}, errors.New("need at least two message sizes to fit α and busbw")
	}
	best := bestByShape(xs, ts)
	if !best[0].ok {
		return Params{}, errors.New("the samples do not grow with the message size: cannot fit a bandwidth")
	}
	// A shape's number is also the parameters it adds to one line: 1 for
	// the floor, 2 for the low-latency line, 3 for both. Each must take
	// this much off the largest error.
	const gain = 0.02
	chosen := 0
	for shape := 1; shape < len(best); shape++ {
		if best[shape].ok && best[shape].e < best[chosen].e-gain*float64(shape-chosen) {
			chosen = shape
		}
	}
	return best[chosen].p, nil
}

// candidate is a fitted model and its largest relative error.
type candidate struct {
	p  Params
	e  float64
	ok bool
}

// bestByShape fits every split of the sorted samples (xs, ts) into floor,
// low-latency and main runs, and returns the best fit of each shape:
// index bit 1 set means a floor, bit 2 a low-latency line.
func bestByShape(xs, ts []float64) [4]candidate {
	lines := lineFits{xs: xs, ts: ts, memo: map[[2]int]lineFit{}}
	var cuts []int // runs split between distinct message sizes only
	for i := range xs {
		if i == 0 || xs[i] != xs[i-1] {
			cuts = append(cuts, i)
		}
	}
	var best [4]candidate
	for ik, k := range cuts {
		for _, j := range cuts[ik:] {
			main, ok := lines.fit(j, len(xs))
			if !ok {
				continue
			}
			p, shape := Params{Bandwidth: main.Bandwidth, Latency: main.Latency}, 0
			if k > 0 {
				p.Launch, shape = round(floorFor(ts[:k])*1e6, 1), shape|1
			}
			if j > k {
				ll, ok := lines.fit(k, j)
				if !ok {
					continue
				}
				p.LowLatency, shape = &ll, shape|2
			}
			if e := worstError(p, xs, ts); !best[shape].ok || e < best[shape].e {
				best[shape] = candidate{p, e, true}
			}
		}
	}
	return best
}

// lineFits fits lines to runs of the samples (xs, ts), each run once.
type lineFits struct {
	xs, ts []float64
	memo   map[[2]int]lineFit
}

type lineFit struct {
	line Line
	ok   bool
}

// fit is the line through samples a..b-1; ok is false when they cannot
// define one (fewer than two sizes, or times that do not grow).
func (f lineFits) fit(a, b int) (Line, bool) {
	if r, done := f.memo[[2]int{a, b}]; done {
		return r.line, r.ok
	}
	var r lineFit
	if distinct(f.xs[a:b]) >= 2 {
		l, err := fitLine(f.xs[a:b], f.ts[a:b])
		r = lineFit{l, err == nil}
	}
	f.memo[[2]int{a, b}] = r
	return r.line, r.ok
}

// sortedByX returns the points' x = S·f(n) and times, by increasing x
// (a local copy's x is its bytes read plus written).
func sortedByX(points []FitPoint) (xs, ts []float64) {
	x := func(p FitPoint) float64 {
		if p.Link == LinkMemory || p.Link == LinkCompute {
			return float64(p.Bytes) // one device's bytes or operations: no bus factor
		}
		return float64(p.Bytes) * BusFactor(p.Collective, p.Ranks)
	}
	sorted := slices.SortedStableFunc(slices.Values(points), func(a, b FitPoint) int { return cmp.Compare(x(a), x(b)) })
	for _, p := range sorted {
		xs, ts = append(xs, x(p)), append(ts, p.Seconds)
	}
	return xs, ts
}

// floorFor is the constant with the smallest largest relative error
// against times ts: 2·min·max / (min + max).
func floorFor(ts []float64) float64 {
	lo, hi := slices.Min(ts), slices.Max(ts)
	return 2 * lo * hi / (lo + hi)
}

// worstError is p's largest relative error over the samples (xs, ts).
func worstError(p Params, xs, ts []float64) float64 {
	e := 0.0
	for i := range xs {
		e = max(e, math.Abs(p.Seconds(xs[i])/ts[i]-1))
	}
	return e
}

// fitLine fits α and β = 1/busbw to times ts of x = S·f(n) bytes xs,
// minimizing the largest relative error max |(α + x·β − t)/t| with α ≥ 0.
// β is searched on a logarithmic grid, refined around the best point; for
// each β the best α is found by ternary search (the largest error is
// convex in α).
func fitLine(xs, ts []float64) (Line, error) {
	tmax := slices.Max(ts)
	lo, hi := math.Log(1e-9/5000), math.Log(1e-9/1) // busbw between 1 and 5000 GB/s
	bestB, bestA, bestE := 0.0, 0.0, math.Inf(1)
	for range 4 {
		const steps = 120
		for k := 0; k <= steps; k++ {
			b := math.Exp(lo + (hi-lo)*float64(k)/steps)
			a, e := bestAlpha(xs, ts, b, tmax)
			if e < bestE {
				bestB, bestA, bestE = b, a, e
			}
		}
		w := (hi - lo) / 20
		lo, hi = math.Log(bestB)-w, math.Log(bestB)+w
	}
	if !(bestB > 0) || bestE > 1 {
		return Line{}, errors.New("the samples do not grow with the message size: cannot fit a bandwidth")
	}
	return Line{Bandwidth: round(1/bestB/1e9, 1), Latency: round(bestA*1e6, 1)}, nil
}

// bestAlpha returns the α in [0, tmax] that minimizes the largest relative
// error for a given β, and that error. The error is max(up(α), down(α)),
// the largest overshoot and the largest undershoot: up grows with α and
// down shrinks, so the best α is where they cross, found by bisection.
func bestAlpha(xs, ts []float64, beta, tmax float64) (float64, float64) {
	gap := func(a float64) (up, down float64) {
		up, down = math.Inf(-1), math.Inf(-1)
		for i := range xs {
			r := (a+xs[i]*beta)/ts[i] - 1
			up, down = max(up, r), max(down, -r)
		}
		return up, down
	}
	lo, hi := 0.0, tmax
	if up, down := gap(lo); up >= down { // overshooting already at α = 0
		return 0, max(up, down)
	}
	for range 50 {
		m := (lo + hi) / 2
		if up, down := gap(m); up < down {
			lo = m
		} else {
			hi = m
		}
	}
	up, down := gap(hi)
	return hi, max(up, down)
}

// distinct counts the distinct values of sorted xs.
func distinct(xs []float64) int {
	return len(slices.Compact(slices.Clone(xs)))
}

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}
