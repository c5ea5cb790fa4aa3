// A C++ program over Stoke's C libraries: the headers' extern "C" guards
// give it the C names (without them this fails to link).
#include "common/status.h"
#include "loader/loader.h"
#include "storage/dataset.h"
#include "train/fit.h"
#include "train/trainer.h"

#include <cstdio>
#include <cstring>

int main()
{
    stk_status st = stk_error(STK_ERR_IO, "%s: %s", "x.stoke", "missing");
    if (!stk_failed(st) || std::strcmp(stk_last_error(), "x.stoke: missing") != 0) return 1;
    if (stk_failed(STK_END)) return 1;
    stk_loader_options o = stk_loader_defaults();
    stk_fit_options f = stk_fit_defaults();
    stk_trainer_config c = stk_trainer_defaults();
    stk_dataset *ds = nullptr;
    if (stk_dataset_open("/nonexistent.stoke", &ds) == STK_OK) return 1;
    std::printf("C++: batch %d, patience %d, std %g; %s\n", o.batch_size, f.early.patience,
                (double)c.std[0], stk_last_error());
    return 0;
}
