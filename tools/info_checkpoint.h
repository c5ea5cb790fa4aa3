/* `stoke info` on a checkpoint or an exported weights file (a .safetensors
 * path): the model, its classes by name, the normalisation and transforms
 * training used, where training stands (info_checkpoint.c). Returns the
 * exit status; errors name the file. */
#pragma once

#include <stdbool.h>

int info_checkpoint(const char *path, bool json);
