// Row-block distribution shared by the examples: ny grid rows over `size` ranks as evenly as possible,
// each rank owning the contiguous rows [y0, y1).
#ifndef REVIVE_EXAMPLES_COMMON_ROWS_H_
#define REVIVE_EXAMPLES_COMMON_ROWS_H_

namespace examples {

struct Rows {
  int y0, y1;
};

inline Rows SplitRows(int ny, int rank, int size) {
  const int base = ny / size, extra = ny % size;
  const int y0 = rank * base + (rank < extra ? rank : extra);
  return {y0, y0 + base + (rank < extra ? 1 : 0)};
}

}  // namespace examples

#endif
