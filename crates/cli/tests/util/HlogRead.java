// Reads an HdrHistogram interval log with the Java HdrHistogram library (not loadlab's
// code): prints the number of intervals, the total count, the largest value and the
// StartTime, as `intervals=N count=N max=N start=S`.
//   java -cp HdrHistogram.jar HlogRead.java FILE
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

public class HlogRead {
    public static void main(String[] args) throws Exception {
        HistogramLogReader reader = new HistogramLogReader(args[0]);
        long intervals = 0, count = 0, max = 0;
        Histogram h;
        while ((h = (Histogram) reader.nextIntervalHistogram()) != null) {
            intervals++;
            count += h.getTotalCount();
            max = Math.max(max, h.getMaxValue());
        }
        System.out.println("intervals=" + intervals + " count=" + count + " max=" + max
            + " start=" + reader.getStartTimeSec());
    }
}
