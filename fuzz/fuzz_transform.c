/* Transform spec parse, the fit check, and the sample geometry it plans. */
#include "augment/geometry.h"
#include "augment/transform_spec.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec = fuzz_as_string(data, size);
    if (!spec) return 0;
    stk_transform t;
    if (stk_transform_parse(spec, &t) == STK_OK) {
        char text[512];
        int out;
        stk_transform_format(&t, text, sizeof text);
        (void)stk_transform_fixed_size(&t, &out);
        static const uint32_t sizes[][2] = {{1, 1}, {28, 28}, {640, 480}, {65535, 3}, {3, 65535}};
        for (int i = 0; i < 5; i++) {
            stk_sample_plan p;
            if (stk_transform_check_fits(&t, sizes[i][0], sizes[i][1]) == STK_OK)
                stk_plan_sample(&t, sizes[i][0], sizes[i][1], 1, 2, (uint64_t)i, &p);
        }
    }
    free(spec);
    return 0;
}
