/* cuda_runtime.h (SIMT harness) - the runtime API and the device model. */
#include "cuda_runtime_api.h"
#include "simt.h"
