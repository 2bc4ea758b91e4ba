package handlers

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Charts are drawn on the server as SVG: no script, so the pages'
// Content-Security-Policy stays as it is. The geometry is computed here;
// templates/charts.html only writes the elements, and the stylesheet colours
// them by class, for light and dark schemes alike. Every chart carries its
// numbers as a table too, for those who do not look at pictures.

// The view box every chart is drawn in; the SVG scales to its column.
const (
	chartW, chartH = 640.0, 260.0
	padL, padR     = 56.0, 28.0
	padT, padB     = 12.0, 44.0
)

// series is one named row of numbers, one per bucket.
type series struct {
	Name   string
	Class  string // the stylesheet's colour: s1 … s8
	Values []float64
}

// rect is one bar (or a part of a stacked bar) with what it stands for.
type rect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// tick is a label on an axis at a position.
type tick struct {
	Pos   float64
	Label string
}

// point is a corner of a line.
type point struct{ X, Y float64 }

// line is one series drawn as polylines, broken where a bucket has no data,
// with its points marked.
type line struct {
	Class  string
	Name   string
	Points []point
	Paths  []string // the points attributes of its polylines, one per run of buckets with data
}

// gap is a bucket without data on a line chart: a band marked "no data",
// so that it does not read as a zero.
type gap struct {
	X, Y, W, H float64
	CX, CY     float64 // where its label stands
	Title      string
}

// chartTable is the numbers of a chart: a header, then one row a bucket.
type chartTable struct {
	Head []string
	Rows [][]string
}

// chart is what templates/charts.html draws.
type chart struct {
	ID             string
	Title          string
	XLabel, YLabel string
	W, H           float64
	Bars           []rect
	Lines          []line
	Gaps           []gap
	XTicks, YTicks []tick
	Legend         []series
	Table          chartTable
	Empty          bool // nothing to draw: the chart says so
}

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten, so that the
// axis reads in round numbers.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// yTicks labels 0, half and the top of the axis.
func yTicks(top float64, unit func(float64) string) []tick {
	plotH := chartH - padT - padB
	var ticks []tick
	for _, f := range []float64{0, 0.5, 1} {
		ticks = append(ticks, tick{Pos: padT + plotH*(1-f), Label: unit(top * f)})
	}
	return ticks
}

func count(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// xTicks labels at most about eight of the buckets, evenly.
func xTicks(labels []string, pos func(i int) float64) []tick {
	step := max(1, (len(labels)+7)/8)
	var ticks []tick
	for i := 0; i < len(labels); i += step {
		ticks = append(ticks, tick{Pos: pos(i), Label: labels[i]})
	}
	return ticks
}

// stackedBars draws one stacked bar per bucket, the series on top of each
// other in order.
func stackedBars(id, title, xLabel, yLabel string, buckets []string, ss []series) chart {
	c := chart{ID: id, Title: title, XLabel: xLabel, YLabel: yLabel, W: chartW, H: chartH, Legend: ss}
	c.Table.Head = append([]string{xLabel}, names(ss)...)
	top := 0.0
	for i := range buckets {
		sum := 0.0
		row := []string{buckets[i]}
		for _, s := range ss {
			sum += s.Values[i]
			row = append(row, count(s.Values[i]))
		}
		top = max(top, sum)
		c.Table.Rows = append(c.Table.Rows, row)
	}
	c.Empty = top == 0
	top = niceMax(top)
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	slot := plotW / float64(max(1, len(buckets)))
	barW := math.Max(1, slot*0.8)
	for i, b := range buckets {
		x := padL + slot*float64(i) + (slot-barW)/2
		base := padT + plotH
		for _, s := range ss {
			v := s.Values[i]
			if v <= 0 {
				continue
			}
			h := plotH * v / top
			base -= h
			c.Bars = append(c.Bars, rect{X: x, Y: base, W: barW, H: h, Class: s.Class,
				Title: fmt.Sprintf("%s, %s: %s", b, s.Name, count(v))})
		}
	}
	c.YTicks = yTicks(top, count)
	c.XTicks = xTicks(buckets, func(i int) float64 { return padL + slot*(float64(i)+0.5) })
	return c
}

// noData stands in a line chart's table for a bucket without data.
const noData = "no data"

// axis says how a line chart writes its values: top rounds the largest up
// to the axis's top, tick labels the axis, value writes a value in the
// table.
type axis struct {
	top         func(float64) float64
	tick, value func(float64) string
}

// durationSteps are the tops of a time axis, in seconds, each twice its
// half: the axis reads 0, half and top in round times.
var durationSteps = []float64{60, 120, 600, 1800, 3600, 2 * 3600, 4 * 3600, 12 * 3600, 24 * 3600, 48 * 3600,
	96 * 3600, 7 * 24 * 3600, 14 * 24 * 3600, 28 * 24 * 3600}

// durationAxis writes seconds: round times on the axis, to the minute in
// the table.
func durationAxis(value func(float64) string) axis {
	return axis{
		top: func(v float64) float64 {
			for _, s := range durationSteps {
				if s >= v {
					return s
				}
			}
			return niceMax(v/86400) * 86400
		},
		tick: func(v float64) string {
			switch {
			case v == 0:
				return "0"
			case v < 3600:
				return count(v/60) + "m"
			case v < 96*3600:
				return count(v/3600) + "h"
			}
			return count(v/86400) + "d"
		},
		value: value,
	}
}

// lines draws each series as a line over the buckets. A value that is NaN
// is no data: the line breaks there, and a bucket where every series has
// none is marked.
func lines(id, title, xLabel, yLabel string, buckets []string, ss []series, ax axis) chart {
	c := chart{ID: id, Title: title, XLabel: xLabel, YLabel: yLabel, W: chartW, H: chartH, Legend: ss}
	c.Table.Head = append([]string{xLabel}, names(ss)...)
	top := 0.0
	for i := range buckets {
		row := []string{buckets[i]}
		for _, s := range ss {
			if math.IsNaN(s.Values[i]) {
				row = append(row, noData)
				continue
			}
			top = max(top, s.Values[i])
			row = append(row, ax.value(s.Values[i]))
		}
		c.Table.Rows = append(c.Table.Rows, row)
	}
	c.Empty = top == 0
	top = ax.top(top)
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	step := plotW / float64(max(1, len(buckets)-1))
	pos := func(i int) float64 {
		if len(buckets) == 1 {
			return padL + plotW/2
		}
		return padL + step*float64(i)
	}
	for _, s := range ss {
		l := line{Class: s.Class, Name: s.Name}
		path := ""
		for i, v := range s.Values {
			if math.IsNaN(v) {
				if path != "" {
					l.Paths, path = append(l.Paths, path), ""
				}
				continue
			}
			p := point{X: pos(i), Y: padT + plotH*(1-v/top)}
			l.Points = append(l.Points, p)
			path += fmt.Sprintf("%.1f,%.1f ", p.X, p.Y)
		}
		if path != "" {
			l.Paths = append(l.Paths, path)
		}
		c.Lines = append(c.Lines, l)
	}
	band := min(step, plotW) * 0.8
	for i, b := range buckets {
		if !slices.ContainsFunc(ss, func(s series) bool { return !math.IsNaN(s.Values[i]) }) {
			x0, x1 := max(padL, pos(i)-band/2), min(padL+plotW, pos(i)+band/2)
			c.Gaps = append(c.Gaps, gap{X: x0, Y: padT, W: x1 - x0, H: plotH, CX: (x0 + x1) / 2, CY: padT + plotH/2,
				Title: b + ": " + noData})
		}
	}
	c.YTicks = yTicks(top, ax.tick)
	c.XTicks = xTicks(buckets, pos)
	return c
}

func names(ss []series) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}
