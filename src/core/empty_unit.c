/* The shared library is built from the uroce_core archive (linked
 * whole-archive); CMake needs at least one source file of its own. */
typedef int uroce_empty_unit_t;
