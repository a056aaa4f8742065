// Order statistics of benchmark samples, one definition for every `kiln bench` report.
#pragma once
#include <utility>
#include <vector>

namespace kiln::cli {

// The q-quantile (0..1) of already sorted values, interpolating linearly between neighbouring
// order statistics (so the 0.5-quantile of an even count is the mean of the middle two);
// 0 when empty.
double quantile_of_sorted(const std::vector<double>& sorted, double q);
// The same of unsorted values (sorts a copy).
double quantile(std::vector<double> values, double q);
inline double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

}  // namespace kiln::cli
