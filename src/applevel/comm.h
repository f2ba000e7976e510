// Internal spelling of the peer abstraction; the definition is installed as <revive/detail/comm.hpp>
// because <revive/checkpoint.hpp> and the MPI flavour both need it.
#ifndef REVIVE_SRC_APPLEVEL_COMM_H_
#define REVIVE_SRC_APPLEVEL_COMM_H_
#include "revive/detail/comm.hpp"
#endif
