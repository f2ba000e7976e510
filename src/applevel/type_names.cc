#include "applevel/type_names.h"

#include "revive/checkpoint.hpp"

namespace revive::applevel {

std::string TypeName(uint32_t tag, uint32_t size) {
  using namespace detail;
  switch (tag) {
    case kTagI8: return "int8";
    case kTagI16: return "int16";
    case kTagI32: return "int32";
    case kTagI64: return "int64";
    case kTagU8: return "uint8";
    case kTagU16: return "uint16";
    case kTagU32: return "uint32";
    case kTagU64: return "uint64";
    case kTagF32: return "float";
    case kTagF64: return "double";
    case kTagF128: return "long double";
    case kTagC32: return "complex<float>";
    case kTagC64: return "complex<double>";
    case kTagC128: return "complex<long double>";
    case kTagBool: return "bool";
    case kTagChar: return "char";
    case kTagString: return "string";
    case kTagBlob: return "user type (serialized)";
    case kTagPod: return "POD of " + std::to_string(size) + " bytes";
  }
  return "unknown type tag " + std::to_string(tag);
}

}  // namespace revive::applevel
