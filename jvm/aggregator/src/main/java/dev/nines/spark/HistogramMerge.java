package dev.nines.spark;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;

/**
 * Merges sparse HDR histograms in Spark's streaming state: one row per (window, series, kind)
 * carries a whole histogram, so the state grows with windows x series x kinds, not with buckets.
 *
 * <p>A histogram is one byte array of format {@value #FORMAT}, specified once, in the docstring
 * of {@code streaming/wire.py} (written by {@code streaming.combine}, read by {@code
 * streaming.closed}); this class follows it. Merging adds counts, lost and sum and keeps the max:
 * the same histogram whatever the order, so a replayed batch builds the same state. A typed {@link Aggregator} through {@code
 * functions.udaf} is a TypedImperativeAggregate with binary state: allowed in a streaming
 * aggregation, with Spark's own state store, watermark and exactly-once.
 */
public final class HistogramMerge extends Aggregator<byte[], byte[], byte[]> {
  private static final long serialVersionUID = 1L;

  /**
   * The histogram encoding (streaming/wire.py: FORMAT); bump both, and
   * streaming/state_format.py's STATE_FORMAT, on any change.
   */
  public static final byte FORMAT = 1;
  /** The SQL name PySpark calls: {@code F.call_function(NAME, col)}. */
  public static final String NAME = "nines_hist_merge";

  static final int HEADER = 1 + 3 * 8;
  static final int ENTRY = 4 + 8;

  /** Registers {@link #NAME} in {@code spark}: called once from PySpark through the gateway. */
  public static void register(SparkSession spark) {
    spark.udf().register(NAME, functions.udaf(new HistogramMerge(), Encoders.BINARY()));
  }

  @Override
  public byte[] zero() {
    byte[] empty = new byte[HEADER];
    empty[0] = FORMAT;
    return empty;
  }

  @Override
  public byte[] reduce(byte[] buffer, byte[] histogram) {
    return histogram == null ? buffer : merge(buffer, histogram);
  }

  @Override
  public byte[] merge(byte[] a, byte[] b) {
    int na = entries(a);
    int nb = entries(b);
    if (nb == 0 && na > 0 && header(b) == 0) {
      return a;
    }
    if (na == 0 && nb > 0 && header(a) == 0) {
      return b;
    }
    ByteBuffer x = wrap(a);
    ByteBuffer y = wrap(b);
    // count the distinct buckets first: the output is allocated once, exactly
    int n = 0;
    int i = 0;
    int j = 0;
    while (i < na && j < nb) {
      int bi = x.getInt(HEADER + i * ENTRY);
      int bj = y.getInt(HEADER + j * ENTRY);
      if (bi <= bj) {
        i++;
      }
      if (bj <= bi) {
        j++;
      }
      n++;
    }
    n += (na - i) + (nb - j);
    byte[] out = new byte[HEADER + n * ENTRY];
    ByteBuffer o = wrap(out);
    o.put(0, FORMAT);
    o.putLong(1, x.getLong(1) + y.getLong(1));
    o.putLong(9, Math.max(x.getLong(9), y.getLong(9)));
    o.putLong(17, x.getLong(17) + y.getLong(17));
    i = 0;
    j = 0;
    int at = HEADER;
    while (i < na || j < nb) {
      int bi = i < na ? x.getInt(HEADER + i * ENTRY) : Integer.MAX_VALUE;
      int bj = j < nb ? y.getInt(HEADER + j * ENTRY) : Integer.MAX_VALUE;
      long count = 0;
      int bucket = Math.min(bi, bj);
      if (bi == bucket) {
        count += x.getLong(HEADER + i * ENTRY + 4);
        i++;
      }
      if (bj == bucket) {
        count += y.getLong(HEADER + j * ENTRY + 4);
        j++;
      }
      o.putInt(at, bucket);
      o.putLong(at + 4, count);
      at += ENTRY;
    }
    return out;
  }

  @Override
  public byte[] finish(byte[] buffer) {
    return buffer;
  }

  @Override
  public Encoder<byte[]> bufferEncoder() {
    return Encoders.BINARY();
  }

  @Override
  public Encoder<byte[]> outputEncoder() {
    return Encoders.BINARY();
  }

  private static ByteBuffer wrap(byte[] h) {
    return ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN);
  }

  /** Lost, max and sum all zero (an empty header adds nothing). */
  private static long header(byte[] h) {
    ByteBuffer b = wrap(h);
    return b.getLong(1) | b.getLong(9) | b.getLong(17);
  }

  private static int entries(byte[] h) {
    if (h.length < HEADER || h[0] != FORMAT || (h.length - HEADER) % ENTRY != 0) {
      throw new IllegalArgumentException(
          "nines histogram: format " + (h.length > 0 ? h[0] : -1) + ", " + h.length
              + " bytes; expected format " + FORMAT + " (a checkpoint of another nines release?)");
    }
    return (h.length - HEADER) / ENTRY;
  }
}
