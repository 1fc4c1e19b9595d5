package org.ingestgateway.checkpoint;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Files;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * Spark's FileSystem-based checkpoint manager, creating local files and directories without Hadoop's chmod.
 *
 * <p>Hadoop's local filesystem sets a permission on every file it creates, and without Hadoop's native
 * library (pyspark ships none) it does so by forking {@code chmod}: one fork from the JVM for every
 * offset-log, commit-log and state-store file, several per micro-batch, milliseconds each, on walCommit,
 * commitOffsets and every task's state commit. Here a local temporary file is opened by Java itself and
 * gets {@code 0666 & ~umask} from open(2) — what that chmod set — and a directory {@code 0777 & ~umask}.
 * Writing to a temporary file and renaming it stays Spark's (atomic on a local or NFS path); any other
 * filesystem is Spark's manager unchanged.
 */
public class LocalCheckpointFileManager extends FileSystemBasedCheckpointFileManager {

    private static final int BUFFER_BYTES = 64 * 1024;

    public LocalCheckpointFileManager(Path path, Configuration hadoopConf) {
        super(path, hadoopConf);
    }

    private boolean local() {
        return fs() instanceof RawLocalFileSystem || fs() instanceof LocalFileSystem;
    }

    private File file(Path path) {
        return new File(fs().makeQualified(path).toUri());
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        if (!local()) {
            return super.createTempFile(path);
        }
        try {
            File file = file(path);
            Files.createDirectories(file.getParentFile().toPath());
            return new FSDataOutputStream(new BufferedOutputStream(new FileOutputStream(file), BUFFER_BYTES), null);
        } catch (IOException e) {
            throw rethrow(e);
        }
    }

    @Override
    public void mkdirs(Path path) {
        if (!local()) {
            super.mkdirs(path);
            return;
        }
        try {
            Files.createDirectories(file(path).toPath());
        } catch (IOException e) {
            throw rethrow(e);
        }
    }

    /** The IOException as it is: Spark's callers (Scala) catch IOException and its subclasses. */
    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException rethrow(Throwable e) throws E {
        throw (E) e;
    }
}
