#include "report/advise/batch_scaling.h"
