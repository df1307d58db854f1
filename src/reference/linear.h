// Internal alias of the linear reference (public header: b12x/reference/linear.h).
#pragma once

#include "b12x/reference/linear.h"
