/* crc32c.c - CRC-32C (Castagnoli), reflected, table driven (slice-by-8). */
#include "internal.h"

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

uint32_t fx_crc32c(uint32_t crc, const void *buf, size_t len)
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
