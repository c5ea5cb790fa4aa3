/* The pixel ops alone, one core: microseconds per image for each spec given
 * (deterministic ops, or random ones drawn afresh per image), on a 224x224
 * RGB photo-like image (or --size N).
 *
 *     bench_pixel_ops [--size N] [--images N] [--rounds N] [--no-vbmi] SPEC...
 * (each spec timed --rounds times over the same draws; the fastest round
 * printed: this machine is shared, and a slow round measures the neighbours)
 *     bench_pixel_ops hue:0.05 colorjitter:0.4:0.4:0.4:0.1 trivialaugment
 */
#include "augment/geometry.h"
#include "augment/pixel_ops.h"
#include "augment/pixel_ops_impl.h"
#include "augment/transform_spec.h"
#include "common/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int size = 224, images = 300, rounds = 5, first = 1;
    for (; first < argc && strncmp(argv[first], "--", 2) == 0; first += 2) {
        if (first + 1 >= argc) break;
        if (!strcmp(argv[first], "--size"))
            size = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--images"))
            images = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--rounds"))
            rounds = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--no-vbmi")) /* the path of CPUs without AVX-512 VBMI */
            stk_pixel_vbmi_allow(false), first--;
    }
    if (first >= argc || size < 8 || size > 4096 || images < 1 || rounds < 1) {
        fprintf(
            stderr,
            "usage: bench_pixel_ops [--size N] [--images N] [--rounds N] [--no-vbmi] SPEC...\n");
        return 2;
    }
    size_t bytes = (size_t)size * size * 3;
    uint8_t *base = malloc(bytes), *img = malloc(bytes);
    if (!base || !img) return 1;
    for (int y = 0; y < size; y++) /* smooth gradients with texture: not all one hue */
        for (int x = 0; x < size; x++) {
            uint8_t *p = base + ((size_t)y * size + x) * 3;
            p[0] = (uint8_t)(x * 255 / size), p[1] = (uint8_t)(y * 255 / size);
            p[2] = (uint8_t)((x * 7 + y * 13) & 255);
        }
    stk_pixel_scratch s = {0};
    stk_pixel_op drawn[STK_PIXEL_MAX_DRAWN];
    printf("%dx%d RGB, %d images, the best of %d rounds, one core\n", size, size, images, rounds);
    for (int a = first; a < argc; a++) {
        stk_transform t;
        if (stk_transform_parse(argv[a], &t) != STK_OK) {
            fprintf(stderr, "bench_pixel_ops: %s\n", stk_last_error());
            return 2;
        }
        uint64_t best = UINT64_MAX; /* the fastest round: the least disturbed by other tenants */
        for (int round = 0; round < rounds; round++) {
            uint64_t ns = 0;
            for (int i = 0; i < images; i++) {
                memcpy(img, base, bytes);
                stk_rng r;
                stk_rng_for_sample_ops(&r, 1, 0, (uint64_t)i);
                int n = stk_pixel_ops_draw(t.ops, t.n_ops, &r, size, size, drawn);
                uint64_t t0 = stk_clock_ns();
                if (stk_pixel_ops_apply(drawn, n, img, (size_t)size * 3, size, size, 3, &s) !=
                    STK_OK) {
                    fprintf(stderr, "bench_pixel_ops: %s: %s\n", argv[a], stk_last_error());
                    return 1;
                }
                ns += stk_clock_ns() - t0;
            }
            best = ns < best ? ns : best;
        }
        double us = (double)best / images / 1e3;
        printf("%-44s %8.1f us/image %6.2f ns/pixel\n", argv[a], us,
               us * 1e3 / ((double)size * size));
    }
    stk_pixel_scratch_deinit(&s);
    free(base);
    free(img);
    return 0;
}
