/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - CRC-32C (Castagnoli), reflected.  The SSE4.2 crc32
 * instruction where the CPU has it (before-images of large overwrites are
 * checksummed at memory speed), else table driven, slice-by-8.
 */
#include "internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>

/*
 * The crc32 instruction takes 3 cycles and can start one per cycle, so
 * long inputs run as three streams of HW_SPAN bytes each; the register
 * of one stream is then moved past the next span's bytes (the CRC of
 * HW_SPAN zero bytes, linear in the register: four table lookups) and
 * folded into it.
 */
#define HW_SPAN 256
static uint32_t hw_shift[4][256]; /* register -> after HW_SPAN zero bytes */
static int hw_shift_ready;

__attribute__((target("sse4.2")))
static uint32_t hw_zeros(uint32_t c)
{
	uint64_t r = c;

	for (int i = 0; i < HW_SPAN / 8; i++)
		r = _mm_crc32_u64(r, 0);
	return (uint32_t)r;
}

__attribute__((target("sse4.2")))
static void hw_shift_init(void)
{
	for (int k = 0; k < 4; k++)
		for (uint32_t b = 0; b < 256; b++)
			hw_shift[k][b] = hw_zeros(b << (8 * k));
	__atomic_store_n(&hw_shift_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t hw_move(uint32_t c)
{
	return hw_shift[0][c & 0xff] ^ hw_shift[1][(c >> 8) & 0xff] ^
	       hw_shift[2][(c >> 16) & 0xff] ^ hw_shift[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = ~crc;

	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	if (len >= 3 * HW_SPAN && !__atomic_load_n(&hw_shift_ready, __ATOMIC_ACQUIRE))
		hw_shift_init(); /* idempotent: racing threads compute equal tables */
	for (; len >= 3 * HW_SPAN; p += 3 * HW_SPAN, len -= 3 * HW_SPAN) {
		uint64_t c1 = 0, c2 = 0;

		for (size_t i = 0; i < HW_SPAN; i += 8) {
			uint64_t v0, v1, v2;

			__builtin_memcpy(&v0, p + i, 8);
			__builtin_memcpy(&v1, p + HW_SPAN + i, 8);
			__builtin_memcpy(&v2, p + 2 * HW_SPAN + i, 8);
			c = _mm_crc32_u64(c, v0);
			c1 = _mm_crc32_u64(c1, v1);
			c2 = _mm_crc32_u64(c2, v2);
		}
		c = hw_move(hw_move((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
	}
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;

		__builtin_memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

static int have_hw(void)
{
	static int hw = -1;
	int v = __atomic_load_n(&hw, __ATOMIC_RELAXED);

	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
		__atomic_store_n(&hw, v, __ATOMIC_RELAXED);
	}
	return v;
}
#endif

static uint32_t tab[8][256];
static int tab_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int s = 1; s < 8; s++)
			tab[s][i] = (tab[s - 1][i] >> 8) ^ tab[0][tab[s - 1][i] & 0xff];
	__atomic_store_n(&tab_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (!__atomic_load_n(&tab_ready, __ATOMIC_ACQUIRE))
		crc_init(); /* idempotent: racing threads compute equal tables */
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
				     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		crc = tab[7][lo & 0xff] ^ tab[6][(lo >> 8) & 0xff] ^
		      tab[5][(lo >> 16) & 0xff] ^ tab[4][lo >> 24] ^
		      tab[3][p[4]] ^ tab[2][p[5]] ^ tab[1][p[6]] ^ tab[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

uint32_t fx_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
	if (have_hw())
		return crc_hw(crc, buf, len);
#endif
	return crc_sw(crc, buf, len);
}

/* For the tests: both implementations must agree. */
uint32_t fx_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	return crc_sw(crc, buf, len);
}
