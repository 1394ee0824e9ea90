package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"sort"
)

// Charts drawn with the standard library only: axes, a grid with numeric
// tick labels (a 3x5 digit font), and one polyline per agent. Colours:
// blue upstream kubelet, orange nodelet (the page says so).

var (
	colUpstream = color.RGBA{31, 119, 180, 255}
	colNodelet  = color.RGBA{255, 127, 14, 255}
	colAxis     = color.RGBA{0, 0, 0, 255}
	colGrid     = color.RGBA{220, 220, 220, 255}
)

const (
	chartW, chartH = 800, 420
	marginL        = 60
	marginB        = 40
	marginT        = 20
	marginR        = 20
)

type chart struct {
	img        *image.RGBA
	xMax, yMax float64
}

func newChart(xMax, yMax, xStep, yStep float64) *chart {
	c := &chart{img: image.NewRGBA(image.Rect(0, 0, chartW, chartH)), xMax: xMax, yMax: yMax}
	for y := 0; y < chartH; y++ {
		for x := 0; x < chartW; x++ {
			c.img.Set(x, y, color.White)
		}
	}
	for v := 0.0; v <= xMax+1e-9; v += xStep {
		x, _ := c.pt(v, 0)
		c.line(x, marginT, x, chartH-marginB, colGrid)
		c.text(x-textWidth(label(v))/2, chartH-marginB+8, label(v))
	}
	for v := 0.0; v <= yMax+1e-9; v += yStep {
		_, y := c.pt(0, v)
		c.line(marginL, y, chartW-marginR, y, colGrid)
		c.text(marginL-8-textWidth(label(v)), y-5, label(v))
	}
	c.line(marginL, chartH-marginB, chartW-marginR, chartH-marginB, colAxis)
	c.line(marginL, marginT, marginL, chartH-marginB, colAxis)
	// Legend, top left inside the plot: a swatch and the agent's name.
	for i, l := range []struct {
		col  color.RGBA
		name string
	}{{colUpstream, "upstream"}, {colNodelet, "nodelet"}} {
		x, y := marginL+16, marginT+10+i*18
		for dy := 0; dy < 10; dy++ {
			for dx := 0; dx < 24; dx++ {
				c.img.Set(x+dx, y+dy, l.col)
			}
		}
		c.text(x+32, y, l.name)
	}
	return c
}

// units labels the axes (x at the right end, y at the top).
func (c *chart) units(x, y string) {
	c.text(chartW-marginR-textWidth(x), chartH-marginB+24, x)
	c.text(4, 4, y)
}

func label(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func (c *chart) pt(x, y float64) (int, int) {
	px := marginL + int(x/c.xMax*float64(chartW-marginL-marginR))
	py := chartH - marginB - int(y/c.yMax*float64(chartH-marginT-marginB))
	return px, py
}

func (c *chart) line(x0, y0, x1, y1 int, col color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		c.img.Set(x0, y0, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func (c *chart) thick(x0, y0, x1, y1 int, col color.Color) {
	for d := -1; d <= 1; d++ {
		c.line(x0, y0+d, x1, y1+d, col)
		c.line(x0+d, y0, x1+d, y1, col)
	}
}

func (c *chart) polyline(pts [][2]float64, col color.Color) {
	for i := 1; i < len(pts); i++ {
		x0, y0 := c.pt(pts[i-1][0], pts[i-1][1])
		x1, y1 := c.pt(pts[i][0], pts[i][1])
		c.thick(x0, y0, x1, y1, col)
	}
}

// A 3x5 font for digits and '.', drawn at scale 2.
var glyphs = map[rune][5]string{
	'0': {"111", "101", "101", "101", "111"},
	'1': {"010", "110", "010", "010", "111"},
	'2': {"111", "001", "111", "100", "111"},
	'3': {"111", "001", "111", "001", "111"},
	'4': {"101", "101", "111", "001", "001"},
	'5': {"111", "100", "111", "001", "111"},
	'6': {"111", "100", "111", "101", "111"},
	'7': {"111", "001", "010", "010", "010"},
	'8': {"111", "101", "111", "101", "111"},
	'9': {"111", "101", "111", "001", "111"},
	'.': {"000", "000", "000", "000", "010"},
	'-': {"000", "000", "111", "000", "000"},
	'a': {"000", "110", "011", "101", "111"},
	'd': {"001", "001", "111", "101", "111"},
	'e': {"000", "111", "111", "100", "111"},
	'l': {"110", "010", "010", "010", "111"},
	'm': {"000", "111", "111", "101", "101"},
	'n': {"000", "110", "101", "101", "101"},
	'o': {"000", "111", "101", "101", "111"},
	'p': {"000", "111", "101", "111", "100"},
	'r': {"000", "101", "110", "100", "100"},
	's': {"011", "100", "111", "001", "110"},
	't': {"010", "111", "010", "010", "011"},
	'u': {"000", "101", "101", "101", "111"},
	'i': {"010", "000", "010", "010", "010"},
	'M': {"101", "111", "111", "101", "101"},
	'B': {"110", "101", "110", "101", "110"},
	' ': {"000", "000", "000", "000", "000"},
}

const glyphScale = 2

func textWidth(s string) int { return len(s) * 4 * glyphScale }

func (c *chart) text(x, y int, s string) {
	for i, r := range s {
		g, ok := glyphs[r]
		if !ok {
			continue
		}
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row][col] != '1' {
					continue
				}
				for dy := 0; dy < glyphScale; dy++ {
					for dx := 0; dx < glyphScale; dx++ {
						c.img.Set(x+i*4*glyphScale+col*glyphScale+dx, y+row*glyphScale+dy, colAxis)
					}
				}
			}
		}
	}
}

func (c *chart) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// niceStep picks a grid step giving about 5-10 lines up to max.
func niceStep(maxV float64) float64 {
	if maxV <= 0 {
		return 1
	}
	raw := maxV / 8
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func roundUp(v, step float64) float64 { return math.Ceil(v/step) * step }

// cdfPoints is the empirical CDF of latencies (ms) as (seconds, fraction).
func cdfPoints(a *AgentResult) [][2]float64 {
	var all []float64
	for _, b := range a.Bursts {
		all = append(all, b.RunningMs...)
	}
	sort.Float64s(all)
	pts := [][2]float64{{0, 0}}
	for i, v := range all {
		pts = append(pts, [2]float64{v / 1000, float64(i) / float64(len(all))}, [2]float64{v / 1000, float64(i+1) / float64(len(all))})
	}
	return pts
}

func drawCDF(path string, up, nl *AgentResult) error {
	pu, pn := cdfPoints(up), cdfPoints(nl)
	xMax := 0.0
	for _, p := range append(append([][2]float64{}, pu...), pn...) {
		xMax = math.Max(xMax, p[0])
	}
	step := niceStep(xMax)
	c := newChart(roundUp(xMax, step), 1, step, 0.1)
	c.polyline(pu, colUpstream)
	c.polyline(pn, colNodelet)
	c.units("s", "")
	return c.save(path)
}

func drawRSS(path string, up, nl *AgentResult) error {
	var cu, cn [][2]float64
	if len(up.Bursts) > 0 {
		cu = up.Bursts[0].RSSCurve
	}
	if len(nl.Bursts) > 0 {
		cn = nl.Bursts[0].RSSCurve
	}
	xMax, yMax := 0.0, 0.0
	for _, p := range append(append([][2]float64{}, cu...), cn...) {
		xMax, yMax = math.Max(xMax, p[0]), math.Max(yMax, p[1])
	}
	xs, ys := niceStep(xMax), niceStep(yMax)
	c := newChart(roundUp(xMax, xs), roundUp(yMax*1.05, ys), xs, ys)
	c.polyline(cu, colUpstream)
	c.polyline(cn, colNodelet)
	c.units("s", "MiB")
	return c.save(path)
}
