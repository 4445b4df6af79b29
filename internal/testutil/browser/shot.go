package browser

import (
	"bytes"
	"image"
	"image/png"
)

// minInkPixels is how many pixels must differ from the background for a
// page not to count as blank: about one short word of body text.
const minInkPixels = 100

// analyse decodes the PNG screenshot and fills in its size, colours and ink.
func analyse(data []byte, r *Result) error {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return err
	}
	b := img.Bounds()
	r.Width, r.Height = b.Dx(), b.Dy()
	counts := map[uint32]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[pixel(img, x, y)]++
		}
	}
	bg, most := uint32(0), 0
	for c, n := range counts {
		if n > most || n == most && c < bg {
			bg, most = c, n
		}
	}
	total := r.Width * r.Height
	ink := total - most
	r.Colors = len(counts)
	if total > 0 {
		r.Ink = float64(ink) / float64(total)
	}
	r.Blank = ink < minInkPixels
	return nil
}

// pixel packs a pixel's colour into 32 bits (8 per channel, alpha
// included), reading the common decoded layouts directly: At on a
// 1200×16000 screenshot is slow.
func pixel(img image.Image, x, y int) uint32 {
	switch m := img.(type) {
	case *image.NRGBA:
		i := m.PixOffset(x, y)
		p := m.Pix[i : i+4 : i+4]
		return uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])
	case *image.RGBA:
		i := m.PixOffset(x, y)
		p := m.Pix[i : i+4 : i+4]
		return uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])
	}
	cr, cg, cb, ca := img.At(x, y).RGBA()
	return cr>>8<<24 | cg>>8<<16 | cb>>8<<8 | ca>>8
}
