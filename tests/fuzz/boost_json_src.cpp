// Boost.JSON compiled header-only into the fuzz targets, so they need no g++-built
// library and the parser itself is instrumented.
#include <boost/json/src.hpp>
