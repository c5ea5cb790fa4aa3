/* Transform spec parse, its canonical text (parsed again to the same
 * transform), the fit check, the sample geometry it plans, and its pixel ops
 * drawn and run on a small image. */
#include "augment/geometry.h"
#include "augment/pixel_ops.h"
#include "augment/transform_spec.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec = fuzz_as_string(data, size);
    if (!spec) return 0;
    stk_transform t;
    if (stk_transform_parse(spec, &t) == STK_OK) {
        char text[4096];
        int out;
        stk_transform_format(&t, text, sizeof text);
        stk_transform again;
        if (stk_transform_parse(text, &again) != STK_OK || again.n_ops != t.n_ops) abort();
        (void)stk_transform_fixed_size(&t, &out);
        static const uint32_t sizes[][2] = {{1, 1}, {28, 28}, {640, 480}, {65535, 3}, {3, 65535}};
        for (int i = 0; i < 5; i++) {
            stk_sample_plan p;
            if (stk_transform_check_fits(&t, sizes[i][0], sizes[i][1]) == STK_OK)
                stk_plan_sample(&t, sizes[i][0], sizes[i][1], 1, 2, (uint64_t)i, &p);
        }
        uint8_t img[9 * 7 * 3];
        for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)(i * 29);
        stk_pixel_op drawn[STK_PIXEL_MAX_DRAWN];
        stk_pixel_scratch scratch = {0};
        for (int c = 1; c <= 3; c += 2) {
            stk_rng r;
            stk_rng_init(&r, 1, 2, 3);
            int n = stk_pixel_ops_draw(t.ops, t.n_ops, &r, 9, 7, drawn);
            (void)stk_pixel_ops_apply(drawn, n, img, 9 * (size_t)c, 9, 7, c, &scratch);
        }
        stk_pixel_scratch_deinit(&scratch);
    }
    free(spec);
    return 0;
}
