"""A folder of JPEG photos in class subfolders for the docs' runs: N per
class of cat, dog and bird, 96x80 pixels, each class its own colour and
shape over noise (so a few epochs learn something), made with PIL.

    make_photos.py OUT_DIR [N]
"""
import os
import random
import sys

from PIL import Image, ImageDraw

out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 48
rng = random.Random(7)
for k, name in enumerate(("cat", "dog", "bird")):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for i in range(n):
        img = Image.effect_noise((96, 80), 40).convert("RGB")
        d = ImageDraw.Draw(img)
        x, y, r = rng.randrange(20, 76), rng.randrange(20, 60), rng.randrange(10, 20)
        colour = [(220, 120, 40), (60, 160, 220), (90, 200, 80)][k]
        box = (x - r, y - r, x + r, y + r)
        [d.ellipse, d.rectangle, lambda b, fill: d.polygon(
            [(b[0], b[3]), ((b[0] + b[2]) // 2, b[1]), (b[2], b[3])], fill=fill)][k](box, fill=colour)
        img.save(os.path.join(out, name, f"{name}_{i:03d}.jpg"), quality=rng.randrange(70, 95))
