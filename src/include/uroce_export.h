/* Symbol export control for libibverbs.so.1.
 *
 * The library is compiled with -fvisibility=hidden and linked with the
 * version script src/libibverbs.map.  A function or object is only part of
 * the ABI if BOTH hold:
 *   - its definition carries UROCE_EXPORT (default ELF visibility), and
 *   - its name is listed in the right version node of src/libibverbs.map.
 * A name in the map without UROCE_EXPORT is silently not exported (the
 * linker treats hidden symbols as local), and a UROCE_EXPORT symbol missing
 * from the map is caught by "local: *;" and not exported either.
 * tests/abi/check_symbols.sh verifies the result against rdma-core 44.
 */
#ifndef UROCE_EXPORT_H
#define UROCE_EXPORT_H

#define UROCE_EXPORT __attribute__((visibility("default")))

#endif
