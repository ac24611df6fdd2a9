"""The frame the GPU benchmarks' SVG charts share (plot_batches.py,
plot_quantized.py, plot_decode_stream.py): step time in ms against the
decode batch size (or another x, `xlabel`), one x position per value, a grid
line every `step` ms from `ymin`, a legend column on the right."""

W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 380, 60, 150, 30, 50


class Chart:
    def __init__(self, title, batches, ymax, step,
                 xlabel="sequences in the step (decode bucket)", ymin=0):
        self.ymax, self.ymin = ymax, ymin
        n = max(1, len(batches) - 1)
        self.xs = {b: LEFT + (W - LEFT - RIGHT) * i / n for i, b in enumerate(batches)}
        self.out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
                    f'font-family="sans-serif" font-size="12">',
                    f'<rect width="{W}" height="{H}" fill="white"/>',
                    f'<text x="{LEFT}" y="18" font-size="14">{title}</text>']
        v = ymin
        while v <= ymax + 1e-9:
            self.out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{self.y(v):.1f}" '
                            f'y2="{self.y(v):.1f}" stroke="#ddd"/><text x="{LEFT - 8}" '
                            f'y="{self.y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
            v += step
        for b in batches:
            self.out.append(f'<text x="{self.xs[b]:.1f}" y="{H - BOTTOM + 18}" '
                            f'text-anchor="middle">{b}</text>')
        self.out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">'
                        f'{xlabel}</text>')
        self.out.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 16 '
                        f'{(TOP + H - BOTTOM) / 2})" text-anchor="middle">ms per step</text>')

    def y(self, v):
        return TOP + (H - TOP - BOTTOM) * (1 - (v - self.ymin) / (self.ymax - self.ymin))

    def line(self, pts, color, dashed=False, width=2):
        """A polyline through (batch, ms) points."""
        points = " ".join(f"{self.xs[b]:.1f},{self.y(ms):.1f}" for b, ms in pts)
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        stroke = f' stroke-width="{width}"' if width else ""
        self.out.append(f'<polyline points="{points}" fill="none" stroke="{color}"{stroke}{dash}/>')

    def legend(self, row, color, label, indent=12, dashed=False, width=2):
        ly = TOP + 20 + 22 * row
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        self.out.append(f'<line x1="{W - RIGHT + indent}" x2="{W - RIGHT + indent + 25}" '
                        f'y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="{width}"{dash}/><text '
                        f'x="{W - RIGHT + indent + 31}" y="{ly + 4}">{label}</text>')

    def write(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.out + ["</svg>"]) + "\n")
